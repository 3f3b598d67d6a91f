"""Energy-aware search: how much search energy pruning saves, against Optuna, same seeds.

Usage (from the repository root)::

    python -m benchmarks.pruning --quick                      # 2 seeds, small budgets (smoke)
    python -m benchmarks.pruning --problems synthetic --seeds 10
    python -m benchmarks.pruning --problems zeus --seeds 10   # the six Zeus V100 workloads
    python -m benchmarks.pruning --report-only --out runs/pruning --record   # docs/results/pruning/<date>

Problems: :mod:`benchmarks.curves` (a synthetic learning-curve problem and the
Zeus traces replayed epoch by epoch with their measured V100 energy) and
:mod:`benchmarks.nas_curves` (``nas``: CNNs trained live on digits, energy
ESTIMATED from CPU time; ``--nas-epochs``, ``--nas-n-init``)::

    python -m benchmarks.pruning --problems nas --seeds 5   # 24 trials, 8 epochs

Methods:
    ``ecopt``            qLogNEHVI, no pruning
    ``ecopt-hyperband``  qLogNEHVI + ``HyperbandPruner()`` (defaults)
    ``ecopt-dominance``  qLogNEHVI + ``DominancePruner()`` (defaults)
    ``ecopt-cost``       qLogNEHVI with ``cost_aware=True`` (per predicted joule), no pruning
    ``ecopt-cost-dominance``  the same + ``DominancePruner()`` (defaults)
    ``ecopt-economy``    qLogNEHVI with ``proposal_share=0.25``, no pruning: the search's own
                         energy against the trials' (table ``with_proposals``); on the
                         curve problems its trials are metered at their replayed joules
                         (the replay meter), which the economy rule weighs proposals
                         against: the expensive-trial regime on the Zeus traces
    ``ecopt-random``, ``ecopt-random-hyperband``, ``ecopt-random-dominance``
                         the same with ecopt's random sampler (Sobol first): where
                         proposals are not steered away from dominated regions
    ``ecopt-budget``     qLogNEHVI, no pruning, ``optimize(energy_budget_j=B)`` with ``B`` the
                         median search energy ``ecopt`` needed to reach 95% of the
                         hypervolume (:data:`ENERGY_BUDGET_J`, from the recorded run); its
                         trials are metered at the trace's joules (the replay meter), so the
                         budget counts what the search spent (table ``budget``: how close
                         to ``B`` it came, never over it, and the hypervolume it reached)
    ``ecopt-budget-dominance``  the same + ``DominancePruner()``: what pruning buys at an
                         equal energy budget
    ``ecopt-stop``       qLogNEHVI, no pruning, ``optimize(stop_when_converged=True)``: the
                         stopping rule with its defaults ends the study before the budget
                         when the GPs see no improvement beyond noise (table ``stopping``:
                         hypervolume at the stop over the same seed's full-budget ``ecopt``
                         run, and the trial energy saved)
    ``ecopt-obsref``     qLogNEHVI, no pruning, ``ref_point_rule="observed"``: the inferred
                         reference point from every observation (as Optuna's GPSampler)
                         instead of the observed front's nadir
    ``optuna-tpe``       Optuna ``TPESampler(multivariate=True)``, two objectives, no pruning
                         (Optuna's pruners are single-objective)
    ``optuna-gp``        Optuna ``GPSampler``, two objectives, no pruning
    ``optuna-hyperband`` Optuna TPE + ``HyperbandPruner`` on a scalarised objective: the
                         mean of the two objectives each scaled to [0, 1] by the true
                         front's range (knowledge the other methods do not get); each
                         report scalarises the quality so far and the energy the trial
                         will have spent at the end (its energy per epoch times the epochs)

Every method starts from ecopt's Sobol initial design of ``2 (d + 1)``
configurations (enqueued in Optuna) and runs ``budget`` trials. Each
evaluation samples its training run from ``default_rng((seed, trial, 7919))``,
the same for every method. After each trial: the hypervolume of the true final
values of the complete trials so far, and the search energy so far (joules of
every epoch every trial ran). The headline is the search energy to reach 95%
of the true front's hypervolume (``inf`` when a run never reaches it; a
one-sided Mann-Whitney U test that a method needs less than ``ecopt``).

ecopt studies use the ``estimate`` meter, so the proposals' own energy
(model fits, acquisition) is recorded too (an estimate on this CPU; reported
apart from the trials' joules).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shlex
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/pruning.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks import nas_curves
from benchmarks.curves import (
    CURVE_PROBLEMS,
    ZEUS_WORKLOADS,
    CurveProblem,
    make_curve_problem,
)
from benchmarks.mobo import _load_runs, _optuna_distributions, initial_design
from benchmarks.nas_curves import NAS_PROBLEMS, economy_active

__all__ = ["METHODS", "ecopt_sampler_and_pruner", "main", "optuna_study", "run_one", "summarise",
           "time_decisions"]

BASELINE = "ecopt"
TARGET = 0.95
METHODS: dict[str, str] = {
    "ecopt": "ecopt qLogNEHVI, no pruning",
    "ecopt-hyperband": "ecopt qLogNEHVI + HyperbandPruner() (defaults)",
    "ecopt-dominance": "ecopt qLogNEHVI + DominancePruner() (defaults)",
    "ecopt-cost": "ecopt qLogNEHVI, cost_aware=True, no pruning",
    "ecopt-cost-dominance": "ecopt qLogNEHVI, cost_aware=True + DominancePruner() (defaults)",
    "ecopt-random": "ecopt random sampler, no pruning",
    "ecopt-random-hyperband": "ecopt random sampler + HyperbandPruner() (defaults)",
    "ecopt-random-dominance": "ecopt random sampler + DominancePruner() (defaults)",
    "optuna-tpe": "Optuna TPESampler(multivariate=True), 2 objectives, no pruning",
    "optuna-gp": "Optuna GPSampler, 2 objectives, no pruning",
    "optuna-hyperband": "Optuna TPE + HyperbandPruner on a scalarised objective",
    "ecopt-stop": "ecopt qLogNEHVI, no pruning, optimize(stop_when_converged=True)",
    "ecopt-economy": "ecopt qLogNEHVI, no pruning, proposal_share=0.25 (economy proposals "
                     "when a proposal costs more than a quarter of a trial)",
    "ecopt-obsref": "ecopt qLogNEHVI, no pruning, ref_point_rule='observed' (the reference "
                    "point from every observation, not the observed front)",
    "ecopt-budget": "ecopt qLogNEHVI, no pruning, optimize(energy_budget_j=ENERGY_BUDGET_J)",
    "ecopt-budget-dominance": "ecopt qLogNEHVI + DominancePruner(), "
                              "optimize(energy_budget_j=ENERGY_BUDGET_J)",
}
#: What the record of a NAS run says about it (see :mod:`benchmarks.nas_curves`).
NAS_NOTE = (
    "nas: live training of CNNs on scikit-learn digits (1x8x8 images; digits, NOT CIFAR-10) on "
    "this CPU; every joule is ESTIMATED by the 'estimate' meter (CPU time x 10 W per core + "
    "resident memory x 0.375 W/GB), trials and proposals alike, so samples/J ranks models by "
    "the CPU time they burn. No true front: the HV target is 95% of the hypervolume of the "
    "union front of the complete trials of every method and seed in this run, against one "
    "reference point below it (BoTorch's rule, floored at 0); values are the trials' final "
    "observed accuracy and inference samples/J (noisy: timing on a shared machine). Table "
    "with_proposals adds a second target, 95% of the median final hypervolume of the ecopt "
    "runs, and the search energy with the proposals' own estimated joules added. "
    "optuna-hyperband minimises the mean of 1 - accuracy and -log(samples/J), each scaled by "
    "its range over the seed's complete initial-design trials (which run unpruned to set the "
    "scale, then are reported to Hyperband's rungs).")
#: Methods that end a study with the stopping rule (compared with the same seed's ``ecopt``).
STOPPING = ("ecopt-stop",)
#: Methods that run under an energy budget (table ``budget``, not ``pruning``).
BUDGETED = ("ecopt-budget", "ecopt-budget-dominance")
#: ``energy_budget_j`` of the budgeted methods, per problem: the median search energy the
#: unpruned ``ecopt`` needed to reach 95% of the hypervolume over 10 seeds, recorded in
#: docs/results/pruning/2026-12-03 (``pruning`` table; the exact medians). So the question
#: is: given the energy the plain search typically needs, how often does a budgeted study
#: get there, with and without pruning. Problems without an entry are not budgeted.
ENERGY_BUDGET_J: dict[str, float] = {
    "zeus-cifar100": 3.548654e6,
    "zeus-imagenet": 1.282122e8,
    "zeus-librispeech": 3.751068e8,
    "zeus-movielens-1m": 1.177177e6,
    "zeus-sentiment140": 5.093220e7,
    "zeus-squad": 2.907597e7,
}


def _observe(problem: CurveProblem, params: dict[str, Any], seed: int, k: int
             ) -> tuple[np.ndarray, float]:
    return problem.run(params, np.random.default_rng((seed, k, 7919)))


# -- runners -----------------------------------------------------------------------
def _replay_meter() -> Any:
    """The meter of cost-aware runs: an epoch's window gets the epoch's replayed joules.

    What a real meter would measure of the run, so the cost model learns the
    trace's energy; every other window (the proposals) is the ``estimate``
    meter's, as in the other ecopt runs.
    """
    from ecopt.meters import get_meter
    from ecopt.meters.base import ComponentEnergy, Meter

    class ReplayMeter(Meter):
        name = "replay+estimate"

        def __init__(self) -> None:
            super().__init__()
            self.inner = get_meter("estimate")
            self.epoch_j: float | None = None

        def _start(self) -> Any:
            return ("replay", self.epoch_j) if self.epoch_j is not None \
                else ("inner", self.inner._start())

        def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
            if state[0] == "replay":
                return {"gpu": ComponentEnergy(state[1], "replayed-trace", False)}
            return self.inner._stop(state[1], duration_s)

    return ReplayMeter()


class _Replay:
    """The objective of an ecopt study: replays a sampled run epoch by epoch."""

    def __init__(self, problem: CurveProblem, seed: int, meter: Any = None) -> None:
        self.problem = problem
        self.seed = seed
        self.meter = meter  # a replay meter: each epoch a phase of its joules
        self.epochs: dict[int, int] = {}
        self.epoch_j: dict[int, float] = {}

    def __call__(self, trial: Any) -> dict[str, float]:
        import ecopt

        curve, epj = _observe(self.problem, dict(trial.params), self.seed, trial.number)
        q, e = self.problem.names
        self.epoch_j[trial.number] = epj
        for step in range(1, self.problem.max_step + 1):
            self.epochs[trial.number] = step
            if self.meter is not None:
                self.meter.epoch_j = epj
                with trial.phase("train"):
                    pass
                self.meter.epoch_j = None
            trial.report(step, {q: float(curve[step - 1]), e: epj * step})
            if trial.should_stop():
                raise ecopt.TrialPruned()
        return {q: float(curve[-1]), e: epj * self.problem.max_step}


def ecopt_sampler_and_pruner(method: str, seed: int, n_init: int) -> tuple[Any, str | None]:
    """The sampler and pruner (by name) of an ``ecopt*`` method."""
    import ecopt
    from ecopt.samplers import QLogNEHVISampler, RandomSampler

    pruner = ("hyperband" if method.endswith("-hyperband") else
              "dominance" if method.endswith("-dominance") else None)
    sampler: ecopt.samplers.Sampler = (
        RandomSampler(seed=seed, n_sobol=n_init) if method.startswith("ecopt-random")
        else QLogNEHVISampler(seed=seed, n_init=n_init,
                              cost_aware=method.startswith("ecopt-cost"),
                              ref_point_rule="observed" if method == "ecopt-obsref" else "front",
                              proposal_share=0.25 if method == "ecopt-economy" else None))
    return sampler, pruner


def time_decisions(study: Any) -> list[float]:
    """Wrap the study's pruner so each decision's CPU seconds are appended to the returned list."""
    decide_s: list[float] = []
    if study.pruner is not None:
        inner = study.pruner.decide

        def timed(trial: Any, history: Any) -> Any:
            t0 = time.process_time()
            d = inner(trial, history)
            decide_s.append(time.process_time() - t0)
            return d

        study.pruner.decide = timed
    return decide_s


def _run_ecopt(problem: CurveProblem, method: str, seed: int, budget: int) -> dict[str, Any]:
    import ecopt

    sampler, pruner = ecopt_sampler_and_pruner(method, seed, problem.n_init)
    budget_j = None
    if method in BUDGETED:
        if problem.name not in ENERGY_BUDGET_J:
            raise ValueError(f"{method} needs an energy budget for {problem.name!r}; "
                             f"ENERGY_BUDGET_J has {sorted(ENERGY_BUDGET_J)}")
        budget_j = ENERGY_BUDGET_J[problem.name]
    # The economy rule weighs a proposal's joules against the trials' metered ones: the
    # economy arm's trials are metered at the trace's joules, as a real meter would read them
    # (with the estimate meter a replayed epoch costs nothing and every trial looks cheap).
    meter = (_replay_meter() if method.startswith("ecopt-cost") or method in BUDGETED
             or method == "ecopt-economy" else None)
    study = ecopt.Study(problem.space, problem.objectives, storage=None,
                        meter=meter or "estimate", sampler=sampler, pruner=pruner, seed=seed)
    decide_s = time_decisions(study)
    replay = _Replay(problem, seed, meter)
    recs = study.optimize(replay, n_trials=budget, show_progress=False,
                          stop_when_converged=method in STOPPING, energy_budget_j=budget_j)
    trials: list[dict[str, Any]] = []
    for r in sorted(recs, key=lambda r: r.number):
        search = r.proposal.get("search", {})
        trials.append({"params": dict(r.params), "state": r.state.value,
                       "epochs": replay.epochs.get(r.number, 0),
                       "epoch_j": replay.epoch_j.get(r.number, 0.0),
                       "economy": economy_active(r.proposal),
                       "proposal_j": search.get("energy_j") or 0.0,
                       "proposal_s": search.get("duration_s") or 0.0})
    study.close()
    # What the study itself counted against the budget: its trials' metered joules (the
    # replayed epochs) plus its proposals' (estimated on this CPU).
    spent = sum(r.energy_j for r in recs) + sum(t["proposal_j"] for t in trials)
    return {"trials": trials, "decide_s": decide_s, "stop_reason": study.stop_reason,
            "energy_budget_j": budget_j, "study_spent_j": spent if budget_j else None}


def _scalariser(problem: CurveProblem) -> Any:
    """``(quality, energy_j) -> [0, 1]``-ish: the mean of both scaled by the true front's range."""
    from ecopt import pareto

    # The true front, from a dense sample of true values (exact for the Zeus tables).
    Y = _true_table(problem)
    F = Y[pareto.non_dominated(Y, problem.directions)]
    lo, hi = F.min(axis=0), F.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    qmax = problem.directions[0] == "max"

    def s(q: float, e: float) -> float:
        uq = (hi[0] - q) / span[0] if qmax else (q - lo[0]) / span[0]
        return 0.5 * uq + 0.5 * (e - lo[1]) / span[1]

    return s


def _true_table(problem: CurveProblem) -> np.ndarray:
    from scipy.stats import qmc

    U = qmc.Sobol(problem.space.dim, scramble=True, seed=0).random(4096)
    out = []
    for u in U:
        try:
            out.append(problem.true_final(problem.space.decode(u)))
        except ValueError:
            continue
    return np.array(out)


def optuna_study(problem_name: str, method: str, seed: int, n_init: int, max_step: int,
                 directions: Sequence[str]) -> Any:
    """The Optuna study of an ``optuna-*`` method.

    ``optuna-gp``: ``GPSampler``; otherwise ``TPESampler(multivariate=True)``,
    both with ``n_init`` startup trials. ``optuna-hyperband`` is single-objective
    (a scalarised value, minimised) with ``HyperbandPruner(1, max_step, 3)``; the
    others have one direction per objective.
    """
    import optuna
    from optuna.samplers import GPSampler, TPESampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if method == "optuna-gp":
        sampler: Any = GPSampler(seed=seed, n_startup_trials=n_init)
    else:
        sampler = TPESampler(seed=seed, multivariate=True, n_startup_trials=n_init)
    if method == "optuna-hyperband":
        # A fixed name: Optuna's Hyperband picks each trial's bracket from a hash of it.
        return optuna.create_study(direction="minimize", sampler=sampler,
                                   study_name=f"pruning-{problem_name}-{seed}",
                                   pruner=optuna.pruners.HyperbandPruner(
                                       min_resource=1, max_resource=max_step,
                                       reduction_factor=3))
    dirs: list[Any] = ["maximize" if d == "max" else "minimize" for d in directions]
    return optuna.create_study(directions=dirs, sampler=sampler)


def _run_optuna(problem: CurveProblem, method: str, seed: int, budget: int) -> dict[str, Any]:
    import optuna

    n_init = problem.n_init
    single = method == "optuna-hyperband"
    study = optuna_study(problem.name, method, seed, n_init, problem.max_step,
                         problem.directions)
    if single:
        scal = _scalariser(problem)
    for params in initial_design(problem, seed):
        study.enqueue_trial(params)
    dists = _optuna_distributions(problem)
    trials = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(budget):
            t0 = time.perf_counter()
            trial = study.ask(fixed_distributions=dists)
            ask_s = time.perf_counter() - t0
            params = {n: trial.params[n] for n in problem.space.searched_names}
            row = {"params": params, "state": "complete", "epochs": 0, "epoch_j": 0.0,
                   "proposal_j": None, "proposal_s": ask_s}
            trials.append(row)
            try:
                curve, epj = _observe(problem, params, seed, k)
            except ValueError:
                row["state"] = "failed"
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            row["epoch_j"] = epj
            pruned = False
            for step in range(1, problem.max_step + 1):
                row["epochs"] = step
                if single:
                    trial.report(scal(float(curve[step - 1]), epj * problem.max_step), step)
                    if trial.should_prune():
                        pruned = True
                        break
            if pruned:
                row["state"] = "pruned"
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            elif single:
                study.tell(trial, scal(float(curve[-1]), epj * problem.max_step))
            else:
                study.tell(trial, [float(curve[-1]), epj * problem.max_step])
    return {"trials": trials, "decide_s": []}


def run_one(problem: CurveProblem, method: str, seed: int, budget: int) -> dict[str, Any]:
    """One (problem, method, seed) run: per trial its state, epochs and joules; HV and energy curves."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    t0, c0 = time.perf_counter(), time.process_time()
    out = (_run_ecopt if method.startswith("ecopt") else _run_optuna)(problem, method, seed, budget)
    hv, energy, epochs = [], [], []
    done: list[np.ndarray] = []
    spent = 0.0
    n_epochs = 0
    trial_j = [t["epochs"] * t["epoch_j"] for t in out["trials"]]
    for t, tj in zip(out["trials"], trial_j):
        spent += tj
        n_epochs += t["epochs"]
        if t["state"] == "complete":
            done.append(problem.true_final(t["params"]))
        hv.append(problem.hypervolume(np.array(done)) if done else 0.0)
        energy.append(spent)
        epochs.append(n_epochs)
    return {"problem": problem.name, "method": method, "seed": seed, "budget": budget,
            "max_hv": problem.max_hv, "max_step": problem.max_step, "hv": hv,
            "energy_j": energy, "epochs": epochs,
            "states": [t["state"] for t in out["trials"]],
            "trial_j": trial_j,
            "proposal_j": [t["proposal_j"] for t in out["trials"]],
            "proposal_s": [t["proposal_s"] for t in out["trials"]],
            "economy": [t.get("economy") for t in out["trials"]],
            "decide_s": out["decide_s"], "stop_reason": out.get("stop_reason"),
            "energy_budget_j": out.get("energy_budget_j"),
            "study_spent_j": out.get("study_spent_j"),
            "wall_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0}


# -- summary -----------------------------------------------------------------------
def energy_to(run: dict[str, Any], fraction: float) -> float:
    """Search energy when the run first reached ``fraction`` of the max hypervolume (inf: never)."""
    goal = fraction * run["max_hv"]
    for h, e in zip(run["hv"], run["energy_j"]):
        if h >= goal * (1 - 1e-12):
            return float(e)
    return math.inf


def _p_less(a: Sequence[float], b: Sequence[float]) -> float | None:
    """One-sided Mann-Whitney U p-value that ``a`` tends to be smaller than ``b``."""
    from scipy.stats import mannwhitneyu

    if len(a) < 2 or len(b) < 2 or (len(set(a)) == 1 and set(a) == set(b)):
        return None
    return float(mannwhitneyu(a, b, alternative="less").pvalue)


def baseline_of(method: str) -> str:
    """The run a method is compared with: the same sampler without pruning."""
    return "ecopt-random" if method.startswith("ecopt-random") else BASELINE


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per problem and method: energy to 95% of the max HV, final HV, epochs, pruning, p-values."""
    out: dict[str, Any] = {}
    for prob in sorted({r["problem"] for r in runs}, key=lambda p: (p != "synthetic", p)):
        pr = [r for r in runs if r["problem"] == prob]
        by_m: dict[str, list[dict[str, Any]]] = {}
        for r in pr:
            by_m.setdefault(r["method"], []).append(r)
        rows = {}
        for m in [m for m in METHODS if m in by_m]:
            bm = baseline_of(m)
            base = sorted(by_m.get(bm, []), key=lambda r: r["seed"])
            base_e = [energy_to(r, TARGET) for r in base]
            base_hv = [r["hv"][-1] for r in base]
            base_ep = [r["epochs"][-1] for r in base]
            rs = sorted(by_m[m], key=lambda r: r["seed"])
            e95 = [energy_to(r, TARGET) for r in rs]
            final = [r["hv"][-1] / r["max_hv"] for r in rs]
            epochs = [r["epochs"][-1] for r in rs]
            full = [r["budget"] * r["max_step"] for r in rs]
            decide = [s for r in rs for s in r["decide_s"]]
            props = [p for r in rs for p in r["proposal_j"] if p is not None]
            finite = [e for e in e95 if math.isfinite(e)]
            rows[m] = {
                "n_seeds": len(rs),
                "baseline": bm,
                "reached": sum(math.isfinite(e) for e in e95),
                "energy_to_95_j": e95,
                "median_energy_to_95_j": float(np.median(e95)) if e95 else None,
                "mean_energy_to_95_j_reached": float(np.mean(finite)) if finite else None,
                "p_less_energy_than_baseline": None if m == bm else _p_less(e95, base_e),
                "final_hv_fraction": final,
                "mean_final_hv_fraction": float(np.mean(final)),
                "hv_kept_vs_baseline": (float(np.mean([r["hv"][-1] for r in rs]) / np.mean(base_hv))
                                     if base_hv and np.mean(base_hv) > 0 else None),
                "p_lower_hv_than_baseline": (None if m == bm else
                                          _p_less([r["hv"][-1] for r in rs], base_hv)),
                "epochs_fraction": float(np.mean(epochs) / np.mean(full)),
                "epochs_saved_vs_baseline": (1.0 - float(np.mean(epochs) / np.mean(base_ep))
                                          if base_ep else None),
                "search_energy_j": float(np.mean([r["energy_j"][-1] for r in rs])),
                "pruned": float(np.mean([r["states"].count("pruned") for r in rs])),
                "proposal_j": float(np.mean([sum(p for p in r["proposal_j"] if p is not None)
                                             for r in rs])) if props else None,
                "decide_ms_median": float(np.median(decide) * 1000) if decide else None,
                "decide_ms_p99": float(np.percentile(decide, 99) * 1000) if decide else None,
                "decide_ms_max": float(np.max(decide) * 1000) if decide else None,
                **(_stopping(rs, base) if m in STOPPING else {}),
                **(_budgeted(rs, base) if m in BUDGETED else {}),
            }
        out[prob] = {"budget": pr[0]["budget"], "max_step": pr[0]["max_step"],
                     "max_hv": pr[0]["max_hv"], "rows": rows}
    return out


def _stopping(rs: Sequence[dict[str, Any]], base: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A stopping-rule method against the same seeds' full-budget baseline runs."""
    full = {r["seed"]: r for r in base}
    paired = [(r, full[r["seed"]]) for r in rs if r["seed"] in full]
    ratio = [r["hv"][-1] / b["hv"][-1] for r, b in paired if b["hv"][-1] > 0]
    saved = [1.0 - r["energy_j"][-1] / b["energy_j"][-1] for r, b in paired
             if b["energy_j"][-1] > 0]
    return {"stopped_early": sum(str(r.get("stop_reason") or "").startswith("converged")
                                 for r in rs),
            "trials_run": [len(r["hv"]) for r in rs],
            "hv_at_stop_vs_full": ratio,
            "mean_hv_at_stop_vs_full": float(np.mean(ratio)) if ratio else None,
            "within_10pct_of_full": sum(x >= 0.9 for x in ratio),
            "trial_energy_saved_vs_full": saved,
            "mean_trial_energy_saved_vs_full": float(np.mean(saved)) if saved else None}


def _budgeted(rs: Sequence[dict[str, Any]], base: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A budgeted method: its spending against the budget and the same seeds' full runs."""
    full = {r["seed"]: r for r in base}
    used = [r["study_spent_j"] / r["energy_budget_j"] for r in rs]
    ratio = [r["hv"][-1] / full[r["seed"]]["hv"][-1] for r in rs
             if r["seed"] in full and full[r["seed"]]["hv"][-1] > 0]
    return {"energy_budget_j": rs[0]["energy_budget_j"],
            "budget_used": used, "over_budget": sum(u > 1.0 for u in used),
            "trials_run": [len(r["hv"]) for r in rs],
            "hv_at_budget_vs_full": ratio,
            "reached_in_budget": sum(r["hv"][-1] >= TARGET * r["max_hv"] * (1 - 1e-12)
                                     for r in rs),
            "final_hv": [r["hv"][-1] / r["max_hv"] for r in rs]}


def _budget_table(summary: dict[str, Any]) -> dict[str, Any]:
    cols = ["problem", "method", "seeds", "energy_budget_j", "budget used (mean, max)",
            "over budget", "trials run (mean of cap)", "reached 95% HV",
            "final HV / max (mean)", "HV / full-budget ecopt HV (mean, min)",
            "p (higher HV than ecopt-budget)"]
    rows = []
    for prob, s in summary.items():
        plain = s["rows"].get("ecopt-budget")
        for m, r in s["rows"].items():
            if m not in BUDGETED:
                continue
            p = (None if m == "ecopt-budget" or plain is None
                 else _p_less(plain["final_hv"], r["final_hv"]))
            ratio = r["hv_at_budget_vs_full"]
            rows.append([prob, m, r["n_seeds"], _fmt_j(r["energy_budget_j"]),
                         f"{np.mean(r['budget_used']):.0%}, {max(r['budget_used']):.0%}",
                         f"{r['over_budget']}/{r['n_seeds']}",
                         f"{np.mean(r['trials_run']):.1f} of {s['budget']}",
                         f"{r['reached_in_budget']}/{r['n_seeds']}",
                         f"{np.mean(r['final_hv']):.3f}",
                         "-" if not ratio else f"{np.mean(ratio):.3f}, {min(ratio):.3f}",
                         _fmt_p(p)])
    return {"columns": cols, "rows": rows}


def _stopping_table(summary: dict[str, Any]) -> dict[str, Any]:
    cols = ["problem", "method", "seeds", "stopped early", "trials run (mean of budget)",
            "HV at stop / full-budget HV (mean, min)", "within 10% of full HV",
            "trial energy saved vs full budget (mean)"]
    rows = []
    for prob, s in summary.items():
        for m, r in s["rows"].items():
            if m not in STOPPING:
                continue
            ratio = r["hv_at_stop_vs_full"]
            rows.append([prob, m, r["n_seeds"], f"{r['stopped_early']}/{r['n_seeds']}",
                         f"{np.mean(r['trials_run']):.1f} of {s['budget']}",
                         "-" if not ratio else f"{np.mean(ratio):.3f}, {min(ratio):.3f}",
                         f"{r['within_10pct_of_full']}/{len(ratio)}",
                         "-" if r["mean_trial_energy_saved_vs_full"] is None
                         else f"{r['mean_trial_energy_saved_vs_full']:.0%}"])
    return {"columns": cols, "rows": rows}


def _fmt_j(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "not reached"
    for unit, f in (("MJ", 1e6), ("kJ", 1e3)):
        if abs(x) >= f:
            return f"{x / f:.3g} {unit}"
    return f"{x:.3g} J"


def _fmt_p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3g}"


def tables(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The recorded tables: ``pruning`` (one row per problem and method) and ``decide_speed``."""
    cols = ["problem", "method", "compared with", "seeds", "reached 95% HV",
            "median search energy to 95% HV", "p (less energy)", "final HV / max", "HV kept",
            "p (lower HV)", "epochs saved", "pruned trials (mean)"]
    rows = []
    speed = []
    for prob, s in summary.items():
        for m, r in s["rows"].items():
            if m in BUDGETED:  # their own table: a budget ends them, not the trial count
                continue
            same = m == r["baseline"]
            rows.append([prob, m, "-" if same else r["baseline"], r["n_seeds"],
                         f"{r['reached']}/{r['n_seeds']}", _fmt_j(r["median_energy_to_95_j"]),
                         _fmt_p(r["p_less_energy_than_baseline"]),
                         f"{r['mean_final_hv_fraction']:.3f}",
                         "-" if same or r["hv_kept_vs_baseline"] is None
                         else f"{r['hv_kept_vs_baseline']:.3f}",
                         _fmt_p(r["p_lower_hv_than_baseline"]),
                         "-" if same or r["epochs_saved_vs_baseline"] is None
                         else f"{r['epochs_saved_vs_baseline']:.0%}",
                         f"{r['pruned']:.1f}"])
            if r["decide_ms_median"] is not None:
                speed.append([prob, m, f"{r['decide_ms_median']:.2f}", f"{r['decide_ms_p99']:.2f}",
                              f"{r['decide_ms_max']:.2f}"])
    return {"pruning": {"columns": cols, "rows": rows},
            "decide_speed": {"columns": ["problem", "pruner", "median ms", "p99 ms", "max ms"],
                             "rows": speed},
            "stopping": _stopping_table(summary),
            "budget": _budget_table(summary)}


def markdown_table(t: dict[str, Any]) -> str:
    lines = ["| " + " | ".join(t["columns"]) + " |", "|" + "---|" * len(t["columns"])]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in t["rows"]]
    return "\n".join(lines)


def record(summary: dict[str, Any], runs: Sequence[dict[str, Any]], dest: Path,
           command: str, notes: Sequence[str] = (), facts: dict[str, Any] | None = None,
           extra_tables: dict[str, dict[str, Any]] | None = None) -> Path:
    """Write the recorded run (``summary.json``, ``summary.md``) through :mod:`docs.recorded`.

    Four tables (ids ``pruning``, ``decide_speed``, ``stopping``, ``budget``) and any
    ``extra_tables`` (the NAS problem's ``with_proposals``), so
    ``python -m docs.tables`` can copy them into doc pages.
    """
    from docs import recorded

    probs = {r["problem"] for r in runs}
    energy = {
        "meter": "; ".join(p for p in (
            "synthetic: simulated joules (a model, not a measurement)" if "synthetic" in probs
            else "",
            "zeus-*: NVIDIA V100 energy per epoch measured by Zeus (summary_power_v100.csv), "
            "replayed" if any(p.startswith("zeus-") for p in probs) else "",
            "nas: ESTIMATED joules of live CNN training on this CPU (meter 'estimate': CPU time "
            "x 10 W per core + resident memory x 0.375 W/GB; no RAPL, no GPU)"
            if "nas" in probs else "") if p),
        "measured": bool(probs) and all(p.startswith("zeus-") for p in probs),
        "note": "trial energy is the trace's measured GPU joules (Zeus), simulated units "
                "(synthetic) or an estimate from CPU time (nas: every phase of every trial, "
                "pruned ones up to their stop); the proposals' own energy in ecopt studies is "
                "an estimate on this CPU (meter 'estimate', no RAPL) and is reported apart",
    }
    legend = (
        f"pruning: target {TARGET:.0%} of the true front's hypervolume; search energy = joules "
        "of every epoch every trial ran (pruned ones included); each method is compared with "
        "the same sampler without the feature (`ecopt` for qLogNEHVI and the Optuna methods, "
        "`ecopt-random` for the random sampler): one-sided Mann-Whitney U p-values that it "
        "needs less energy to reach the target (runs that never reach it count as infinite "
        "energy) and that its final hypervolume is lower; HV kept = its mean final "
        "hypervolume over the baseline's; epochs saved = 1 - its mean epochs over the "
        "baseline's. decide_speed: CPU time of one pruner decision (time.process_time). "
        "stopping: a stopping-rule method against the same seed's full-budget `ecopt` run "
        "(the proposals are the same up to the stop): its hypervolume when it stopped over the "
        "full run's, and 1 - its trial joules over the full run's. budget: a budgeted method "
        "(energy_budget_j = the median energy `ecopt` needed to reach the target) against the "
        "budget (what the study counted: its trials' replayed joules plus its proposals' "
        "estimate) and against the same seed's full-budget `ecopt` run; p = one-sided "
        "Mann-Whitney U that its final hypervolume is higher than ecopt-budget's.")
    if "nas" in probs:
        notes = [*notes, NAS_NOTE]
    tabs = {k: recorded.Table(t["columns"], t["rows"])
            for k, t in {**tables(summary), **(extra_tables or {})}.items()}
    facts = {"target_fraction_of_max_hv": TARGET, "methods": METHODS,
             "energy_by_problem": {p: {"measured": p.startswith("zeus-"),
                                       "source": "Zeus V100 measurement, replayed"
                                       if p.startswith("zeus-") else
                                       "ESTIMATED from CPU time (meter 'estimate')"
                                       if p == "nas" else "simulated units"}
                                   for p in sorted(probs)},
             **(facts or {}),
             "problems": {p: {k: v for k, v in s.items() if k != "rows"}
                          for p, s in summary.items()},
             "per_method": {p: {m: {k: v for k, v in r.items() if k not in ("energy_to_95_j",)}
                                for m, r in s["rows"].items()} for p, s in summary.items()}}
    recorded.write_run(dest, script="benchmarks/pruning.py", command=command, tables=tabs,
                       energy=energy, title="Energy-aware search: search energy to 95% of the "
                       "front's hypervolume", notes=[legend, *notes], facts=facts,
                       extra_libraries=("optuna",))
    return dest


# -- CLI -----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, 15 trials (smoke)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds (default 10; 2 quick)")
    ap.add_argument("--seed-offset", type=int, default=0)
    ap.add_argument("--budget", type=int, default=None, help="trials per study (default: "
                    "the problem's)")
    ap.add_argument("--problems", default="synthetic,zeus",
                    help=f"comma-separated, of {list(CURVE_PROBLEMS)}; 'zeus' = every Zeus workload")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--zeus-dir", default=None, help="directory of the Zeus traces")
    ap.add_argument("--out", default="runs/pruning", help="where runs-<tag>.jsonl go")
    ap.add_argument("--tag", default="main")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="also write the recorded run (summary.json, summary.md) to "
                         "docs/results/pruning/<date>[-TAG]")
    ap.add_argument("--note", action="append", default=[],
                    help="a caveat the recorded run keeps (repeatable)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    nas = ap.add_argument_group("nas (live CNN training on digits, estimated energy)")
    nas.add_argument("--nas-epochs", type=int, default=None, help="epochs per trial (8; 3 quick)")
    nas.add_argument("--nas-n-init", type=int, default=None,
                     help="shared Sobol initial design (8; 4 quick)")
    nas.add_argument("--nas-inference-passes", type=int, default=20,
                     help="passes over the test set in the inference phase")
    return ap


def _nas_problem(args: argparse.Namespace) -> nas_curves.NasProblem:
    quick = bool(args.quick)
    return nas_curves.NasProblem(
        epochs=args.nas_epochs or (3 if quick else 8),
        n_init=args.nas_n_init or (4 if quick else 8),
        budget=8 if quick else 24, inference_passes=args.nas_inference_passes)


def _problem_names(spec: str) -> list[str]:
    names: list[str] = []
    for p in (x.strip() for x in spec.split(",") if x.strip()):
        names += [f"zeus-{d}" for d in ZEUS_WORKLOADS] if p == "zeus" else [p]
    bad = [p for p in names if p not in CURVE_PROBLEMS + NAS_PROBLEMS]
    if bad:
        raise SystemExit(f"unknown problem(s) {bad}; expected some of "
                         f"{list(CURVE_PROBLEMS + NAS_PROBLEMS)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("ecopt").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds if args.seeds is not None else (2 if args.quick else 10)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise SystemExit(f"unknown method(s) {bad}; expected some of {list(METHODS)}")
    names = _problem_names(args.problems)
    if not args.report_only:
        import torch

        torch.set_num_threads(args.threads)
        runs_file = out / f"runs-{args.tag}.jsonl"
        for name in names:
            problem = (_nas_problem(args) if name in NAS_PROBLEMS
                       else make_curve_problem(name, args.zeus_dir))
            budget = args.budget or (problem.budget if isinstance(problem, nas_curves.NasProblem)
                                     else 15 if args.quick else problem.budget)
            for seed in range(args.seed_offset, args.seed_offset + seeds):
                for m in methods:
                    key = (problem.name, m, seed, budget)
                    if any((r["problem"], r["method"], r["seed"], r["budget"]) == key
                           for r in _load_runs(out)):
                        continue
                    r = (nas_curves.run_one(problem, m, seed, budget)
                         if isinstance(problem, nas_curves.NasProblem)
                         else run_one(problem, m, seed, budget))
                    with runs_file.open("a") as fh:
                        fh.write(json.dumps(r) + "\n")
                    hv = ("scored at the end" if math.isnan(r["max_hv"]) else
                          f"HV {r['hv'][-1] / r['max_hv']:.3f} of max, to 95%: "
                          f"{_fmt_j(energy_to(r, TARGET))}")
                    print(f"{problem.name:20s} {m:17s} seed {seed:2d}: {hv}, search energy "
                          f"{_fmt_j(r['energy_j'][-1])}, epochs {r['epochs'][-1]}, pruned "
                          f"{r['states'].count('pruned')} ({r['cpu_s']:.0f} CPU s)", flush=True)
    runs = [r for r in _load_runs(out) if r["problem"] in names and r["method"] in methods]
    if not runs:
        print("no runs to report")
        return 1
    nas_score = nas_curves.score(runs)  # the NAS runs' HV against their union front
    summary = summarise(runs)
    tabs = tables(summary)
    print(markdown_table(tabs["pruning"]))
    print()
    print(markdown_table(tabs["decide_speed"]))
    for name in ("stopping", "budget"):
        if tabs[name]["rows"]:
            print()
            print(markdown_table(tabs[name]))
    extra = ({"with_proposals": nas_curves.with_proposals_table(runs)}
             if any("trial_j" in r for r in runs) else {})
    for t in extra.values():
        print()
        print(markdown_table(t))
    if args.record is not None:
        from docs import recorded

        args_in = sys.argv[1:] if argv is None else list(argv)
        cmd = "python -m benchmarks.pruning " + shlex.join(args_in)
        facts = {"nas": {**nas_score, **_nas_problem(args).info(),
                         "hypervolume": "no true front: the reference point sits below the "
                         "union front of the complete trials of every method and seed reported "
                         "(BoTorch's rule), max_hv is that union front's hypervolume, each run "
                         "scores its own complete trials' final observed values against it",
                         "optuna_hyperband_scalarisation": nas_curves.scalariser.__doc__}} \
            if nas_score else {}
        where = record(summary, runs, recorded.results_dir("pruning", tag=args.record or None),
                       cmd, args.note, facts, extra)
        print(f"recorded in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
