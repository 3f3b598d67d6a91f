"""Report data (ecopt.report): computed from real small studies, checked without matplotlib."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys

import numpy as np
import pytest

import ecopt
from ecopt.errors import NotAStudyError
from ecopt.report import build_compare, build_report, hypervolume_series, is_energy_metric
from ecopt.trial import TrialState

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1),
                           "opt": ecopt.Categorical(["sgd", "adam"])})
OBJS2 = [ecopt.Objective("accuracy", "max"), ecopt.Objective("samples_per_joule", "max")]
OBJS3 = [ecopt.Objective("accuracy", "max"), ecopt.Objective("latency_ms", "min", threshold=50.0),
         ecopt.Objective("samples_per_joule", "max")]


def objective(trial):
    x, y = trial["x"], trial["y"]
    if x > 0.85:
        raise RuntimeError(f"diverged at x={x:.3f}")
    with trial.phase("train"):
        sum(i * i for i in range(2000 + int(4000 * x)))
    # Repeated until the window is long enough for the meter (a single pass is noise).
    trial.repeat_in_phase("inference", lambda: sum(range(2000 + int(8000 * y))),
                       samples_per_call=256)
    return {"accuracy": 1.0 - (x - 0.3) ** 2 - 0.2 * y,
            "samples_per_joule": trial.samples_per_joule("inference")}


def objective3(trial):
    out = objective(trial)
    out["latency_ms"] = 10.0 + 60.0 * trial["y"]
    return out


def make_study(path, objectives=OBJS2, fn=objective, n=14, sampler="random", seed=1,
               fail_fast=3, **kw):
    with ecopt.Study(SPACE, objectives, storage=path, sampler=sampler, meter="estimate",
                     seed=seed, **kw) as s:
        s.optimize(fn, n_trials=n, show_progress=False, fail_fast=fail_fast)
    return path


@pytest.fixture(scope="module")
def study2(tmp_path_factory):
    return make_study(tmp_path_factory.mktemp("r") / "two")


@pytest.fixture(scope="module")
def study3(tmp_path_factory):
    return make_study(tmp_path_factory.mktemp("r") / "three", OBJS3, objective3, n=16, seed=3)


def brute_front(records, objectives):
    ok = [r for r in records if r.state is TrialState.COMPLETE and r.feasible]
    sign = {"max": 1.0, "min": -1.0}

    def z(r):
        return np.array([sign[o.direction] * r.values[o.name] for o in objectives])

    return {a.number for a in ok
            if not any(np.all(z(b) >= z(a)) and np.any(z(b) > z(a)) for b in ok if b is not a)}


@pytest.mark.parametrize("which", ["study2", "study3"])
def test_front_membership_matches_brute_force_and_study(which, request):
    path = request.getfixturevalue(which)
    data = build_report(path)
    study = ecopt.load_study(path)
    assert set(data.front) == brute_front(study.records, study.objectives)
    assert set(data.front) == {r.number for r in study.best_trials()}
    assert data.front  # the fixture studies have complete trials
    assert data.knee in data.front
    # Failed trials are counted and never on the front.
    failed = {r.number for r in study.records if r.state is TrialState.FAILED}
    assert data.counts["failed"] == len(failed) and not failed & set(data.front)
    assert sum(data.counts.values()) == len(study.records)


def test_front_is_ordered_by_first_objective(study2):
    data = build_report(study2)
    acc = [data.record(n).values["accuracy"] for n in data.front]
    assert acc == sorted(acc)


@pytest.mark.parametrize("which", ["study2", "study3"])
def test_hypervolume_series_is_monotone_and_ends_at_study_hypervolume(which, request):
    path = request.getfixturevalue(which)
    data = build_report(path)
    study = ecopt.load_study(path)
    hv = [p.hypervolume for p in data.hv_series]
    assert len(hv) == len(study.records)
    assert all(b >= a for a, b in zip(hv, hv[1:]))
    assert hv[-1] == pytest.approx(study.hypervolume(), rel=1e-12)
    assert data.hypervolume == pytest.approx(study.hypervolume(), rel=1e-12)
    assert hv[-1] > 0
    # Trial numbers in order; cumulative energy is the running sum over every trial.
    recs = sorted(study.records, key=lambda r: r.number)
    assert [p.trial for p in data.hv_series] == [r.number for r in recs]
    assert [p.n_trials for p in data.hv_series] == list(range(1, len(recs) + 1))
    # ...of trials and of the proposals that made them (metered in ask()).
    spent = [r.energy_j + (r.proposal["search"]["energy_j"] or 0.0) for r in recs]
    np.testing.assert_allclose([p.cumulative_energy_j for p in data.hv_series], np.cumsum(spent))
    assert data.search_energy_j == pytest.approx(sum(spent))
    assert data.trial_energy_j == pytest.approx(sum(r.energy_j for r in recs))
    assert 0 < data.proposal_energy_j == pytest.approx(data.search_energy_j - data.trial_energy_j)


def test_three_objective_reference_point_uses_threshold(study3):
    data = build_report(study3)
    assert data.reference_point[1] == 50.0
    assert data.reference_inferred == (True, False, True)


def test_hypervolume_series_at_each_prefix_matches_a_fresh_computation(study2):
    data = build_report(study2)
    study = ecopt.load_study(study2)
    recs = sorted(study.records, key=lambda r: r.number)
    for k in (3, 7, len(recs)):
        ok = [r for r in recs[:k] if r.state is TrialState.COMPLETE]
        Y = np.array([[r.values[o.name] for o in study.objectives] for r in ok])
        expect = ecopt.pareto.hypervolume(Y, data.reference_point, ["max", "max"]) if ok else 0.0
        assert data.hv_series[k - 1].hypervolume == pytest.approx(expect)


def test_payback_arithmetic(study2):
    study = ecopt.load_study(study2)
    data0 = build_report(study2)
    # Baseline: the front trial with the most joules per inference item, or any
    # complete trial worse than the best one.
    jpi = {r.number: r.phases["inference"].energy_j / r.phases["inference"].samples
           for r in study.records if "inference" in r.phases}
    best_front = min(data0.front, key=lambda n: jpi[n])
    baseline = max(jpi, key=lambda n: jpi[n])
    data = build_report(study2, baseline=baseline)
    pb = data.payback
    assert pb is not None and pb.phase == "inference"
    assert pb.best_trial == best_front
    assert pb.baseline_j_per_item == pytest.approx(jpi[baseline])
    assert pb.best_j_per_item == pytest.approx(jpi[best_front])
    search = sum(r.energy_j + r.proposal["search"]["energy_j"] for r in study.records)
    assert pb.search_energy_j == pytest.approx(search)  # trials + proposals
    assert pb.items_to_recover == pytest.approx(search / (jpi[baseline] - jpi[best_front]))
    assert pb.estimated
    text = pb.describe()
    assert f"{math.ceil(pb.items_to_recover):,}" in text and "(estimated)" in text


def test_payback_against_the_best_trial_itself_never_recovers(study2):
    data0 = build_report(study2)
    study = ecopt.load_study(study2)
    by_num = {r.number: r for r in study.records}
    jpi = {n: by_num[n].phases["inference"].energy_j / by_num[n].phases["inference"].samples
           for n in data0.front}
    best = min(jpi, key=jpi.get)
    pb = build_report(study2, baseline=best).payback
    assert pb.saving_j_per_item == 0.0 and pb.items_to_recover is None
    assert "never recovered" in pb.describe()


def test_unusable_baseline_becomes_a_warning_not_an_error(study2):
    data = build_report(study2, baseline=999)
    assert data.payback is None
    assert any("--baseline 999: no finished trial 999" in w for w in data.warnings)
    data = build_report(study2, baseline=0, phase="nope")
    assert any("no phase 'nope'" in w for w in data.warnings)


def test_lifecycle_energy(study2):
    data = build_report(study2, inferences=1e6)
    for n in data.front:
        r = data.record(n)
        inf = r.phases["inference"]
        expect = r.phases["train"].energy_j + 1e6 * inf.energy_j / inf.samples
        assert data.lifecycle_energy_j[n] == pytest.approx(expect)
    with pytest.raises(ValueError, match="inferences must be a finite number >= 0"):
        build_report(study2, inferences=-1)


def test_phase_energy_and_provenance(study2):
    data = build_report(study2)
    # Trials that fail before opening a phase are metered as one "trial" phase: their
    # energy counts in the search's total.
    assert data.phases == ("train", "inference", "trial")
    failed = [r for r in data.records if r.state.value == "failed"]
    assert failed and all(list(r.phases) == ["trial"] for r in failed)
    assert {(pe.trial, pe.phase) for pe in data.phase_energy} == \
        {(n, ph) for n in data.front for ph in ("train", "inference")}
    for pe in data.phase_energy:
        assert pe.sources == "cpu=estimate-cpu-time;ram=estimate-ram"
        assert pe.measured is False and pe.meter == "estimate"
        assert pe.energy_j == pytest.approx(data.record(pe.trial).phases[pe.phase].energy_j)
    assert data.energy_estimated and not data.energy_measured_any
    assert {p.source for p in data.provenance if p.component != "proposals"} == \
        {"estimate-cpu-time", "estimate-ram"}
    props = [p for p in data.provenance if p.component == "proposals"]
    assert [(p.meter, p.measured) for p in props] == [("estimate", False)]
    assert sum(p.energy_j for p in data.provenance) == pytest.approx(data.search_energy_j)


def test_axis_labels_say_estimated_on_energy_axes_only(study2):
    data = build_report(study2)
    assert data.axis_label("samples_per_joule") == "samples_per_joule [max] (estimated)"
    assert data.axis_label("accuracy") == "accuracy [max]"
    assert "(estimated)" in data.axis_label("energy_j")
    assert is_energy_metric("tokens_per_joule") and is_energy_metric("power_w")
    assert not is_energy_metric("accuracy") and not is_energy_metric("latency_ms")


def test_measured_energy_has_no_estimate_flag(tmp_path, study2):
    # Rewrite the log as if a hardware meter had produced every joule.
    dst = tmp_path / "measured"
    dst.mkdir()
    (dst / "study.json").write_text((study2 / "study.json").read_text())
    lines = []
    for line in (study2 / "trials.jsonl").read_text().splitlines():
        d = json.loads(line)
        for ph in d["phases"].values():
            ph["measured"] = True
            ph["meter"] = "nvml"
            ph["components"] = {"gpu:0": {"energy_j": ph["energy_j"], "source": "nvml-energy-counter",
                                          "measured": True}}
        # The same meter measured the proposals (an estimated proposal would flag the study).
        d["proposal"]["search"].update(measured=True, meter="nvml",
                                       source="gpu:0=nvml-energy-counter")
        lines.append(json.dumps(d))
    (dst / "trials.jsonl").write_text("\n".join(lines) + "\n")
    data = build_report(dst)
    assert not data.energy_estimated and data.energy_measured_any
    assert data.axis_label("samples_per_joule") == "samples_per_joule [max]"


def test_not_a_study_empty_and_failed_only(tmp_path):
    with pytest.raises(NotAStudyError, match="has no study.json"):
        build_report(tmp_path)
    with ecopt.Study(SPACE, OBJS2, storage=tmp_path / "empty", sampler="random",
                     meter="estimate"):
        pass
    data = build_report(tmp_path / "empty")
    assert data.records == () and data.front == () and data.hv_series == ()
    assert data.reference_point is None and data.hypervolume == 0.0
    assert any("no finished trials" in w for w in data.warnings)

    def boom(trial):
        raise ValueError(f"no luck for trial {trial.number}")

    make_study(tmp_path / "failed", fn=boom, n=3, fail_fast=None)  # a study of failures only
    data = build_report(tmp_path / "failed")
    assert data.counts["failed"] == 3 and data.front == ()
    assert [p.hypervolume for p in data.hv_series] == [0.0, 0.0, 0.0]
    assert any("no trial completed" in w and "3 failed" in w for w in data.warnings)


def test_torn_last_line_is_a_warning_and_the_rest_is_read(tmp_path, study2):
    dst = tmp_path / "torn"
    dst.mkdir()
    for f in ("study.json", "trials.jsonl"):
        (dst / f).write_bytes((study2 / f).read_bytes())
    n = len(ecopt.load_study(study2).records)
    with open(dst / "trials.jsonl", "ab") as f:
        f.write(b'{"number": 99, "state": "compl')
    data = build_report(dst)
    assert len(data.records) == n
    assert any("torn last line" in w for w in data.warnings)


def test_unfinished_trials_are_listed(tmp_path):
    s = ecopt.Study(SPACE, OBJS2, storage=tmp_path / "live", sampler="random", meter="estimate")
    t = s.ask()
    data = build_report(tmp_path / "live")
    assert data.unfinished == (t.number,)
    s.tell(t, RuntimeError("stop"))
    s.close()


def test_hypervolume_series_without_reference_point_is_zero(study2):
    study = ecopt.load_study(study2)
    s = hypervolume_series(study.records, study.objectives, None)
    assert [p.hypervolume for p in s] == [0.0] * len(study.records)


def test_compare_shared_reference_point(study2, tmp_path):
    other = make_study(tmp_path / "other", n=8, seed=3)
    cmp = build_compare([study2, other])
    assert len(cmp.entries) == 2 and cmp.reference_point is not None
    for e, path in zip(cmp.entries, (study2, other)):
        st = ecopt.load_study(path)
        assert e.hypervolume == pytest.approx(st.hypervolume(cmp.reference_point))
        assert set(e.front_numbers) == {r.number for r in st.best_trials()}
    # The shared point is no better than either study's front in every objective.
    allF = np.vstack([np.array(e.front_values) for e in cmp.entries])
    assert np.all(allF.min(axis=0) > np.array(cmp.reference_point))
    given = build_compare([study2, other], ref_point=[0.0, 0.0])
    assert given.reference_given and given.reference_point == (0.0, 0.0)
    with pytest.raises(ValueError, match="one value per objective"):
        build_compare([study2, other], ref_point=[0.0])
    with pytest.raises(ValueError, match="two or more"):
        build_compare([study2])


def test_compare_refuses_different_objectives(study2, study3):
    with pytest.raises(ValueError, match="must share objectives"):
        build_compare([study2, study3])


def test_report_module_does_not_import_matplotlib():
    code = ("import sys, ecopt.report, ecopt.report.cli, ecopt.plot\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'\n"
            "import ecopt; assert 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_report_names_are_one_object_each():
    import ecopt.plot
    import ecopt.report
    from ecopt.report import cli, figures, html

    assert html.write_report is ecopt.report.write_report
    assert cli.show_text is ecopt.report.show_text
    assert ecopt.plot.pareto is figures.pareto and ecopt.plot.DPI == figures.DPI
    with pytest.raises(AttributeError):
        ecopt.plot.nope  # noqa: B018
    for gone in ("ecopt.report_cli", "ecopt.report_html"):  # no shims for releases that never were
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(gone)


def test_star_import_works_without_matplotlib():
    # A finder that refuses matplotlib stands in for a machine without the [plot] extra.
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'matplotlib':\n"
            "            raise ImportError('no matplotlib here')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from ecopt import *\n"
            "import ecopt.plot\n"
            "try:\n"
            "    ecopt.plot.pareto\n"
            "except ImportError as e:\n"
            "    assert 'ecopt[plot]' in str(e), e\n"
            "else:\n"
            "    raise SystemExit('figures imported without matplotlib?')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_large_three_objective_front_series_matches_direct_computation():
    # 150 points on a sphere: every one on the front, past the incremental threshold.
    from ecopt.trial import TrialRecord

    rng = np.random.default_rng(0)
    X = rng.random((150, 3)) + 0.05
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X[:, 1] = 2.0 - X[:, 1]  # one minimised objective
    objs = [ecopt.Objective("a", "max"), ecopt.Objective("b", "min"), ecopt.Objective("c", "max")]
    recs = [TrialRecord(number=i, state=TrialState.COMPLETE, params={},
                        values=dict(zip("abc", map(float, x))))
            for i, x in enumerate(X)]
    ref = [0.0, 2.0, 0.0]
    series = hypervolume_series(recs, objs, ref)
    hv = [p.hypervolume for p in series]
    assert all(b >= a for a, b in zip(hv, hv[1:]))
    dirs = ["max", "min", "max"]
    for k in (10, 64, 65, 100, 149):
        expect = ecopt.pareto.hypervolume(X[: k + 1], ref, dirs)
        assert hv[k] == pytest.approx(expect, rel=1e-9)
    assert hv[-1] == ecopt.pareto.hypervolume(X, ref, dirs)
