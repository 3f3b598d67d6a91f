"""Energy helpers: samples/J, J/sample, tokens/J, lifecycle energy, repeats with noise."""

from __future__ import annotations

import math

import pytest

import ecopt
from ecopt import energy
from ecopt.meters import ComponentEnergy, Meter


class StepMeter(Meter):
    """Each window costs the next value of ``joules`` (a known, varying energy)."""

    name = "step"

    def __init__(self, joules: list[float]) -> None:
        super().__init__()
        self.joules = list(joules)

    def _start(self):
        return None

    def _stop(self, state, duration_s):
        return {"cpu": ComponentEnergy(self.joules.pop(0), "test", True)}


def test_number_helpers():
    assert energy.samples_per_joule(100, 4.0) == 25.0
    assert energy.joules_per_sample(100, 4.0) == 0.04
    assert energy.tokens_per_joule(500, 2.0) == 250.0
    assert energy.lifecycle_energy_j(1000.0, 0.5, n_inferences=1e6) == 1000.0 + 5e5
    with pytest.raises(ValueError, match="energy_j > 0"):
        energy.samples_per_joule(10, 0.0)
    with pytest.raises(ValueError, match="samples must be a finite number >= 0"):
        energy.samples_per_joule(-1, 1.0)
    with pytest.raises(ValueError, match="samples > 0"):
        energy.joules_per_sample(0, 1.0)
    with pytest.raises(ValueError, match="n_inferences"):
        energy.lifecycle_energy_j(1.0, 1.0, n_inferences=-5)


def test_trial_helpers_and_lifecycle(run_dir):
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
    study = ecopt.Study(space, [ecopt.Objective("a", "max"), ecopt.Objective("life", "min")],
                        storage=run_dir, sampler="random", meter=StepMeter([30.0, 2.0]))
    trial = study.ask(params={"x": 0.5})  # no proposal to meter: the windows are the phases
    with trial.phase("train", samples=1000):
        pass
    with trial.phase("inference", samples=100):
        pass
    assert energy.samples_per_joule(trial, phase="inference") == 50.0
    assert energy.joules_per_sample(trial, phase="inference") == 0.02
    life = energy.lifecycle_energy_j(trial, n_inferences=10_000)
    assert life == pytest.approx(30.0 + 10_000 * 0.02)
    assert energy.lifecycle_energy_j(trial, n_inferences=0) == 30.0
    rec = study.tell(trial, {"a": 1.0, "life": life})
    # The same from the stored record.
    assert energy.lifecycle_energy_j(rec, n_inferences=10_000) == pytest.approx(life)
    assert energy.provenance(rec) == "measured"
    with pytest.raises(ValueError, match="no phase 'eval'"):
        energy.samples_per_joule(rec, phase="eval")
    study.close()


def test_accuracy_sd():
    assert energy.accuracy_sd(0.9, 100) == pytest.approx(0.03)
    assert energy.accuracy_sd(1.0, 10) == 0.0
    with pytest.raises(ValueError, match="accuracy must be in"):
        energy.accuracy_sd(1.2, 10)
    with pytest.raises(ValueError, match="n >= 1"):
        energy.accuracy_sd(0.5, 0)


def test_trimmed_mean_ci_matches_scipy():
    import numpy as np
    from scipy import stats

    xs = [10.0, 11.0, 9.5, 10.2, 30.0, 10.1, 9.9, 10.4, 10.0, 9.7]
    mean, lo, hi, se = energy.trimmed_mean_ci(xs, trim=0.1)
    assert mean == pytest.approx(stats.trim_mean(np.array(xs), 0.1))
    # Tukey-McLaughlin standard error, as scipy's trimmed t-test uses (Yuen).
    n, k = len(xs), 1
    w = np.asarray(stats.mstats.winsorize(np.array(xs), limits=(0.1, 0.1)))
    se_ref = math.sqrt(float(w.var(ddof=1))) / ((1 - 2 * k / n) * math.sqrt(n))
    assert se == pytest.approx(se_ref)
    t = stats.t.ppf(0.975, n - 2 * k - 1)
    assert (lo, hi) == pytest.approx((mean - t * se, mean + t * se))
    assert lo < mean < hi and mean < sum(xs) / n  # the outlier is trimmed away
    assert energy.trimmed_mean_ci([5.0]) == (5.0, 5.0, 5.0, 0.0)
    with pytest.raises(ValueError, match="trim"):
        energy.trimmed_mean_ci(xs, trim=0.5)
    with pytest.raises(ValueError, match="at least one"):
        energy.trimmed_mean_ci([])


def test_repeat_phase_records_noise_for_the_sampler(run_dir):
    joules = [2.0, 2.5, 2.0, 1.5, 2.0]
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
    study = ecopt.Study(space, [ecopt.Objective("a", "max"), ecopt.Objective("spj", "max")],
                        storage=run_dir, sampler="random", meter=StepMeter([0.5] + joules))
    # (the first window is the proposal's: Study.ask meters the sampler)
    calls = []

    def objective(trial):
        res = energy.repeat_phase(trial, "inference", lambda: calls.append(1), k=5,
                                  samples=100, metric="samples_per_joule", report_as="spj")
        return {"a": trial["x"], "spj": res.mean}

    rec = study.optimize(objective, n_trials=1, show_progress=False)[0]
    study.close()
    assert len(calls) == 5
    assert rec.phases["inference"].count == 5 and rec.phases["inference"].samples == 500
    assert rec.phases["inference"].energy_j == pytest.approx(sum(joules))
    per = [100 / j for j in joules]
    mean, lo, hi, se = energy.trimmed_mean_ci(per, 0.1)
    assert rec.values["spj"] == pytest.approx(mean)
    assert rec.noise["spj"] == pytest.approx(se) and se > 0
    stored = rec.user_attrs["repeats:inference"]
    assert stored["values"] == pytest.approx(per) and stored["k"] == 5
    assert stored["ci_low"] == pytest.approx(lo) and stored["ci_high"] == pytest.approx(hi)


def test_repeat_phase_bad_input(run_dir):
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
    study = ecopt.Study(space, [ecopt.Objective("a", "max"), ecopt.Objective("b", "max")],
                        sampler="random", meter="estimate")
    t = study.ask()
    with pytest.raises(ValueError, match="k >= 1"):
        energy.repeat_phase(t, "inference", lambda: None, k=0)
    with pytest.raises(ValueError, match="needs samples"):
        energy.repeat_phase(t, "inference", lambda: None, k=2)
    with pytest.raises(ValueError, match="metric must be one of"):
        energy.repeat_phase(t, "inference", lambda: None, k=2, metric="watts")
    res = energy.repeat_phase(t, "inference", lambda: sum(range(10_000)), k=3, metric="energy_j")
    assert len(res.values) == 3 and res.measured is False and t.noise["energy_j"] >= 0
