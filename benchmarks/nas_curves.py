"""The NAS workload of the energy-aware-search benchmark: live CNN training, estimated joules.

Used by :mod:`benchmarks.pruning` (``--problems nas``). Unlike the curve
problems of :mod:`benchmarks.curves` (replayed tables), every trial here
really trains a CNN: :class:`ecopt.workloads.cnn.CNNObjective` on
scikit-learn's digits (1x8x8 images; digits, NOT CIFAR-10), ``epochs`` epochs,
the architecture + training space of ``experiments/nas_cnn.py``
(:func:`cnn_space`: ``channels``, ``depth``, ``kernel_size``, ``stride``,
``pooling``, ``batch_size``, ``lr``; d = 7). Objectives as in the NAS
experiment: ``accuracy`` (max) and inference ``samples_per_joule`` (max).
With ``report_curve=True`` each epoch's test accuracy is measured (phase
``validate``) and reported with the validate passes' samples/J so far, so a
pruner can stop a trial after any epoch.

Energy: every trial, of every method, runs inside an ecopt trial metered by
the ``estimate`` meter (this process's CPU time x 10 W per core + resident
memory x 0.375 W/GB; ESTIMATED, not measured: the machine has no RAPL and no
GPU). A trial's joules are those of all its phases (``load``, ``train``,
``validate``, ``inference``), a pruned one's up to the epoch it stopped at.
Optuna methods run the same objective in a metering-only ecopt study
(configurations given with ``ask(params=...)``), and their ``ask`` is
metered like ecopt's proposals; the proposals' joules are kept apart.

Hypervolume: there is no true front. :func:`score` takes the final observed
values of the complete trials of *all* runs being reported (every method and
seed), puts one reference point below their union front
(:func:`ecopt.pareto.infer_reference_point`, BoTorch's rule) and calls the
hypervolume of that union front ``max_hv``; each run's curve is the
hypervolume of its own complete trials so far against that point (in raw
samples/J units).
"""

from __future__ import annotations

import importlib.util
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ecopt
from ecopt import pareto

from benchmarks.curves import ObjectiveNames

__all__ = [
    "BASELINE_FRACTION",
    "NAS_PROBLEMS",
    "NasProblem",
    "economy_active",
    "run_one",
    "scalariser",
    "score",
    "trial_row",
    "with_proposals_table",
]

NAS_PROBLEMS = ("nas",)
_ROOT = Path(__file__).resolve().parent.parent


def cnn_space(epochs: int) -> ecopt.SearchSpace:
    """``experiments/nas_cnn.py``'s :func:`cnn_space` (the NAS experiment's space)."""
    spec = importlib.util.spec_from_file_location("nas_cnn", _ROOT / "experiments" / "nas_cnn.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    space: ecopt.SearchSpace = mod.cnn_space(epochs)
    return space


@dataclass
class NasProblem(ObjectiveNames):
    """The CNN architecture search on digits as a two-objective pruning problem.

    Attributes:
        epochs: Training epochs of a full trial (one report per epoch).
        n_init: Sobol initial design shared by every method (set explicitly:
            ``2 (d + 1) = 16`` would leave little of a small budget to the model).
            The defaults (8 epochs, 8 + 16 trials) keep 5 seeds of every method
            under an hour on two shared cores.
        budget: Trials per study.
        inference_passes: Passes over the 360 test images in the ``inference`` phase.
        seed: Data split seed of the objective.
    """

    epochs: int = 8
    n_init: int = 8
    budget: int = 24
    inference_passes: int = 20
    seed: int = 0
    name: str = "nas"
    space: ecopt.SearchSpace = field(init=False)
    objectives: list[ecopt.Objective] = field(init=False)
    _objective: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        for what, v in (("epochs", self.epochs), ("n_init", self.n_init),
                        ("budget", self.budget), ("inference_passes", self.inference_passes)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{what} must be an integer >= 1, got {what}={v!r}")
        self.space = cnn_space(self.epochs)
        self.objectives = [ecopt.Objective("accuracy", "max"),
                           ecopt.Objective("samples_per_joule", "max")]

    @property
    def max_step(self) -> int:
        return self.epochs

    @property
    def objective(self) -> Any:
        """The CNN objective (CPU, float32, learning curve on), its data loaded and warmed up.

        One per process: the data load and torch's first-call set-up are paid
        here, outside every trial, so no method's first trial carries them.
        """
        if self._objective is None:
            import torch

            from ecopt.workloads.cnn import CNNObjective

            obj = CNNObjective(epochs=self.epochs, inference_passes=self.inference_passes,
                               seed=self.seed, device="cpu", report_curve=True)
            Xtr, _, _, _ = obj.data()
            model = obj.build({})
            loss = model(torch.from_numpy(Xtr[:32])).sum()
            loss.backward()
            self._objective = obj
        return self._objective

    def info(self) -> dict[str, Any]:
        """Facts for the record."""
        obj = self.objective
        Xtr, _, Xte, _ = obj.data()
        return {"data": f"{obj.data_name} ({len(Xtr)} train / {len(Xte)} test images)",
                "epochs": self.epochs, "n_init": self.n_init, "d": self.space.dim,
                "inference_passes": self.inference_passes, "device": "cpu",
                "space": self.space.to_dict(),
                "objectives": ["accuracy (max)", "samples_per_joule (max, inference, estimated)"]}


# -- one trial's row ----------------------------------------------------------------
def economy_active(proposal: dict[str, Any]) -> bool | None:
    """Whether a trial's proposal was an economy one (``None``: not a model proposal)."""
    eco = proposal.get("economy")
    return None if not isinstance(eco, dict) else bool(eco.get("active"))


def trial_row(record: Any, proposal_j: float | None = None, proposal_s: float | None = None
              ) -> dict[str, Any]:
    """What the benchmark keeps of one finished ecopt trial record.

    ``trial_j`` is the estimate of every phase the trial ran (a pruned or
    failed trial's phases up to where it stopped); ``epochs`` is the number of
    epochs it reported; ``values`` its final objective values when complete.
    """
    search = record.proposal.get("search", {})
    return {"params": dict(record.params), "state": record.state.value,
            "epochs": len(record.intermediate),
            "trial_j": float(sum(p.energy_j for p in record.phases.values())),
            "phase_j": {k: float(p.energy_j) for k, p in record.phases.items()},
            "values": ([float(record.values[k]) for k in ("accuracy", "samples_per_joule")]
                       if record.state.value == "complete" else None),
            "economy": economy_active(record.proposal),
            "proposal_j": proposal_j if proposal_j is not None else
            float(search.get("energy_j") or 0.0),
            "proposal_s": proposal_s if proposal_s is not None else
            float(search.get("duration_s") or 0.0)}


# -- ecopt ---------------------------------------------------------------------------
def _run_ecopt(problem: NasProblem, method: str, seed: int, budget: int) -> dict[str, Any]:
    from benchmarks.pruning import STOPPING, ecopt_sampler_and_pruner, time_decisions

    sampler, pruner = ecopt_sampler_and_pruner(method, seed, problem.n_init)
    # cost_aware models each trial's energy from the records: here the estimate meter's.
    study = ecopt.Study(problem.space, problem.objectives, storage=None, meter="estimate",
                        sampler=sampler, pruner=pruner, seed=seed)
    decide_s = time_decisions(study)
    recs = study.optimize(problem.objective, n_trials=budget, show_progress=False,
                          stop_when_converged=method in STOPPING)
    trials = [trial_row(r) for r in sorted(recs, key=lambda r: r.number)]
    study.close()
    return {"trials": trials, "decide_s": decide_s, "stop_reason": study.stop_reason}


# -- Optuna --------------------------------------------------------------------------
def scalariser(initial: list[list[float]]) -> Any:
    """``(accuracy, samples_per_joule) -> float`` (minimised) for Optuna's Hyperband.

    The mean of ``1 - accuracy`` and ``-log(samples/J)``, each scaled to [0, 1]
    by its range over ``initial`` (the seed's complete initial-design trials:
    knowledge every method has, none from other runs).
    """
    Y = np.array([[1.0 - a, -math.log(max(s, 1e-12))] for a, s in initial], dtype=float)
    if len(Y):
        lo, hi = Y.min(axis=0), Y.max(axis=0)
    else:
        lo, hi = np.zeros(2), np.ones(2)
    span = np.where(hi > lo, hi - lo, 1.0)

    def s(accuracy: float, samples_per_joule: float) -> float:
        u = np.array([1.0 - accuracy, -math.log(max(samples_per_joule, 1e-12))])
        return float(np.mean((u - lo) / span))

    return s


class _OptunaBridge(ecopt.pruners.Pruner):
    """Forwards an ecopt trial's reports, scalarised, to its Optuna trial's pruner."""

    name = "optuna-hyperband-bridge"

    def __init__(self) -> None:
        super().__init__()
        self.optuna_trial: Any = None
        self.scal: Any = None

    def decide(self, trial: Any, history: Any) -> ecopt.pruners.Decision:
        if self.scal is None or self.optuna_trial is None:
            return ecopt.pruners.Decision(False)  # the initial design: reported once scaled
        last = trial.intermediate[-1]
        if "samples_per_joule" not in last.values:
            return ecopt.pruners.Decision(False)
        self.optuna_trial.report(self.scal(last.values["accuracy"],
                                           last.values["samples_per_joule"]), last.step)
        return ecopt.pruners.Decision(bool(self.optuna_trial.should_prune()), "optuna hyperband")


def optuna_asker(problem: NasProblem, study: Any, harness: ecopt.Study) -> Any:
    """``ask()`` -> ``(optuna trial, ecopt trial, search notes, ask joules)``: Optuna's
    ``ask`` metered with the harness's meter, its configuration (the problem's fixed
    parameters added) asked of the metering-only ecopt ``harness``."""
    from benchmarks.mobo import _optuna_distributions
    from ecopt._search import meter_proposal

    meter = harness.meter
    assert meter is not None
    dists = _optuna_distributions(problem)  # type: ignore[arg-type]
    searched = problem.space.searched_names
    fixed = {n: v for n, v in problem.space.decode([0.5] * problem.space.dim).items()
             if n not in searched}

    def ask() -> tuple[Any, Any, dict[str, Any], float]:
        ot, search, ask_j = meter_proposal(meter, lambda: study.ask(fixed_distributions=dists))
        et = harness.ask(params={**{n: ot.params[n] for n in searched}, **fixed})
        return ot, et, search, ask_j

    return ask


def _run_optuna(problem: NasProblem, method: str, seed: int, budget: int) -> dict[str, Any]:
    from optuna.trial import TrialState

    from benchmarks.mobo import initial_design
    from benchmarks.pruning import optuna_study

    single = method == "optuna-hyperband"
    study = optuna_study(problem.name, method, seed, problem.n_init, problem.epochs,
                         problem.directions)
    searched = problem.space.searched_names
    for params in initial_design(problem, seed):  # type: ignore[arg-type]
        study.enqueue_trial({n: params[n] for n in searched})
    bridge = _OptunaBridge() if single else None
    # Metering only: configurations come from Optuna through ask(params=...).
    harness = ecopt.Study(problem.space, problem.objectives, storage=None, meter="estimate",
                          sampler="random", pruner=bridge, seed=seed)
    ask = optuna_asker(problem, study, harness)
    trials: list[dict[str, Any]] = []
    held: list[tuple[Any, Any]] = []  # Hyperband's initial design: told once the scale is known
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(budget):
            ot, et, search, ask_j = ask()
            if bridge is not None:
                bridge.optuna_trial = ot
            try:
                rec = harness.tell(et, problem.objective(et))
            except Exception as exc:  # noqa: BLE001 - a failed or pruned trial is recorded
                rec = harness.tell(et, exc)
            trials.append(trial_row(rec, ask_j, float(search["duration_s"])))
            if rec.state.value == "pruned":
                study.tell(ot, state=TrialState.PRUNED)
            elif rec.state.value != "complete":
                study.tell(ot, state=TrialState.FAIL)
            elif not single:
                study.tell(ot, [rec.values["accuracy"], rec.values["samples_per_joule"]])
            elif bridge is not None and bridge.scal is None:
                held.append((ot, rec))
            else:
                assert bridge is not None
                study.tell(ot, bridge.scal(rec.values["accuracy"], rec.values["samples_per_joule"]))
            if bridge is not None and bridge.scal is None and k + 1 >= problem.n_init:
                bridge.scal = scalariser([[r.values["accuracy"], r.values["samples_per_joule"]]
                                          for _, r in held])
                for hot, hrec in held:  # their curves, so Hyperband's rungs know them
                    for point in hrec.intermediate:
                        if "samples_per_joule" in point.values:
                            hot.report(bridge.scal(point.values["accuracy"],
                                                   point.values["samples_per_joule"]), point.step)
                            hot.should_prune()  # records the rung value
                    study.tell(hot, bridge.scal(hrec.values["accuracy"],
                                                hrec.values["samples_per_joule"]))
                held = []
    harness.close()
    return {"trials": trials, "decide_s": []}


# -- a run and its score ----------------------------------------------------------------
def run_one(problem: NasProblem, method: str, seed: int, budget: int) -> dict[str, Any]:
    """One (method, seed) run of the NAS problem; its hypervolume comes from :func:`score`.

    Returns the run dict of :func:`benchmarks.pruning.run_one` (``hv`` all zero
    and ``max_hv`` NaN until scored) plus per trial ``values``, ``trial_j``
    and ``phase_j``.
    """
    from benchmarks.pruning import BUDGETED, METHODS

    if method not in METHODS or method in BUDGETED:
        raise ValueError(f"method must be one of {[m for m in METHODS if m not in BUDGETED]} "
                         f"for the NAS problem (no energy budget is set for it), got {method!r}")
    t0, c0 = time.perf_counter(), time.process_time()
    out = (_run_ecopt if method.startswith("ecopt") else _run_optuna)(problem, method, seed, budget)
    ts = out["trials"]
    return {"problem": problem.name, "method": method, "seed": seed, "budget": budget,
            "max_hv": math.nan, "max_step": problem.epochs, "hv": [0.0] * len(ts),
            "energy_j": np.cumsum([t["trial_j"] for t in ts]).tolist(),
            "epochs": np.cumsum([t["epochs"] for t in ts]).astype(int).tolist(),
            "states": [t["state"] for t in ts],
            "values": [t["values"] for t in ts],
            "trial_j": [t["trial_j"] for t in ts],
            "phase_j": [t["phase_j"] for t in ts],
            "params": [t["params"] for t in ts],
            "proposal_j": [t["proposal_j"] for t in ts],
            "proposal_s": [t["proposal_s"] for t in ts],
            "economy": [t.get("economy") for t in ts],
            "decide_s": out["decide_s"], "stop_reason": out.get("stop_reason"),
            "n_init": problem.n_init, "wall_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0}


def score(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Fill ``hv`` and ``max_hv`` of the NAS runs against their union front (in place).

    The reference point sits below the union front of the complete trials of
    every run given (BoTorch's rule, floored at 0), ``max_hv`` is that front's
    hypervolume, and a run's ``hv[i]`` the hypervolume of its complete trials
    up to trial ``i``. Runs of other problems are left alone.

    Returns:
        ``{"reference_point": [...], "max_hv": ..., "n_complete": ...}`` (empty
        when no NAS run has a complete trial).
    """
    nas = [r for r in runs if r["problem"] in NAS_PROBLEMS]
    Y = np.array([v for r in nas for v in r["values"] if v is not None], dtype=float)
    if not len(Y):
        return {}
    dirs = ["max", "max"]
    # BoTorch's rule, floored at 0 (neither accuracy nor samples/J can be negative).
    ref = np.maximum(pareto.infer_reference_point(Y, directions=dirs), 0.0).tolist()
    max_hv = float(pareto.hypervolume(Y, ref, dirs))
    for r in nas:
        done: list[list[float]] = []
        hv = []
        for v in r["values"]:
            if v is not None:
                done.append(v)
            hv.append(float(pareto.hypervolume(np.array(done), ref, dirs)) if done else 0.0)
        r["hv"], r["max_hv"] = hv, max_hv
    return {"reference_point": ref, "max_hv": max_hv,
            "n_complete": len(Y)}


#: The NAS table's second target, relative to the baseline: this fraction of the median
#: final hypervolume of the ``ecopt`` runs (no pruning, full budget). No single run holds
#: 95% of the union front of every run (nor, in the recorded run, 80% of it), so this
#: target says which method reaches what plain ecopt ends with, and for how many joules.
BASELINE_FRACTION = 0.95


def with_proposals_table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Table ``with_proposals``: search energy to the baseline's final HV, proposals counted too.

    Per problem whose runs keep per-trial joules (``trial_j``: the NAS runs and
    the curve problems' runs) and per method (medians over seeds; runs that
    never reach a target count as infinite energy): how many seeds reach 95% of
    ``max_hv`` (the NAS union front or the true front, as table ``pruning``)
    and how many reach :data:`BASELINE_FRACTION` of the median final
    hypervolume of the ``ecopt`` runs; the trials' joules to the latter; the
    same with every proposal's estimated joules added (model fits and
    acquisition, or Optuna's ``ask``); one-sided Mann-Whitney p-values that a
    method needs less than ``ecopt``, trials only and trials + proposals; the
    mean joules of a study's proposals and trials, the proposals' share of the
    trials' (the ratio of those means) and how many of a study's proposals were
    economy ones (mean; ``-`` where the runs did not record it).
    Call after :func:`score`.
    """
    from benchmarks.pruning import (
        BASELINE,
        METHODS,
        TARGET,
        _fmt_j,
        _fmt_p,
        _p_less,
        energy_to,
    )

    def both(r: dict[str, Any]) -> dict[str, Any]:
        total = np.cumsum([t + (p or 0.0) for t, p in zip(r["trial_j"], r["proposal_j"])])
        return {**r, "energy_j": total.tolist()}

    def med(xs: list[float]) -> str:
        return _fmt_j(float(np.median(xs))) if xs else "-"

    def economy(rs: list[dict[str, Any]]) -> str:
        if any("economy" not in r for r in rs):
            return "-"
        return f"{np.mean([sum(e is True for e in r['economy']) for r in rs]):.1f}"

    kept = [r for r in runs if "trial_j" in r and math.isfinite(r["max_hv"])]
    rows = []
    for prob in sorted({r["problem"] for r in kept}):
        by_m: dict[str, list[dict[str, Any]]] = {}
        for r in sorted((r for r in kept if r["problem"] == prob), key=lambda r: r["seed"]):
            by_m.setdefault(r["method"], []).append(r)
        base = by_m.get(BASELINE, [])
        if not base:
            continue
        # energy_to takes a fraction of max_hv: the baseline's target as one.
        goal = BASELINE_FRACTION * float(np.median([r["hv"][-1] for r in base])) / base[0]["max_hv"]
        base_t = [energy_to(r, goal) for r in base]
        base_b = [energy_to(both(r), goal) for r in base]
        for m in [m for m in METHODS if m in by_m]:
            rs = by_m[m]
            hi = [energy_to(r, TARGET) for r in rs]
            lo_t = [energy_to(r, goal) for r in rs]
            lo_b = [energy_to(both(r), goal) for r in rs]
            same = m == BASELINE
            prop = float(np.mean([sum(p or 0.0 for p in r["proposal_j"]) for r in rs]))
            trial = float(np.mean([sum(r["trial_j"]) for r in rs]))
            rows.append([prob, m, len(rs),
                         f"{sum(math.isfinite(e) for e in hi)}/{len(rs)}",
                         f"{sum(math.isfinite(e) for e in lo_t)}/{len(rs)}",
                         med(lo_t), "-" if same else _fmt_p(_p_less(lo_t, base_t)),
                         med(lo_b), "-" if same else _fmt_p(_p_less(lo_b, base_b)),
                         _fmt_j(prop), _fmt_j(trial),
                         f"{prop / trial:.3g}" if trial > 0 else "-", economy(rs)])
    goal_name = f"{BASELINE_FRACTION:.0%} of ecopt's median final HV"
    return {"columns": ["problem", "method", "seeds", f"reached {TARGET:.0%} HV",
                        f"reached {goal_name}", "median trial energy to it",
                        "p (less, trials)", "median trial + proposal energy to it",
                        "p (less, trials + proposals)",
                        "proposals per study (mean)", "trials per study (mean)",
                        "proposals / trials", "economy proposals per study (mean)"],
            "rows": rows}
