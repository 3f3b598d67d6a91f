"""Benchmark problems: BoTorch's multi-objective test functions and the Zeus GPU-energy problem.

Every problem is a minimisation problem in its own units with a known
reference point and maximal hypervolume, so each method's hypervolume can be
scored as ``log10(max_hv - hv)`` over the *true* (noiseless) values of the
points it evaluated. Noisy variants add Gaussian noise of a fixed fraction of
each objective's range (the qNEHVI paper's protocol) to what the optimiser
sees; the score still uses the true values.

Problems:
    branincurrin (d=2, M=2), dtlz2 (d=6, M=2), zdt1 (d=6, M=2),
    vehiclesafety (d=5, M=3), dtlz2m4 (d=6, M=4):
    ``botorch.test_functions.multi_objective``, with their published reference
    points and maximal hypervolumes.
    mixedbc (d=4, M=2: two floats, a categorical, an integer): BraninCurrin
    whose front is reached through two of three categories at the smallest
    integer (:func:`_mixed_problem`), so its reference point and maximal
    hypervolume are BraninCurrin's.
    zeus (d=2 or more, M=2) and zeus4 (M=4: energy, time, power, batch size):
    see :mod:`benchmarks.zeus`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ecopt
from ecopt import pareto

__all__ = ["Problem", "make_problem", "PROBLEM_NAMES", "NOISE_FRACTION", "DEFAULT_ZEUS_DIR"]

#: Noise standard deviation as a fraction of each objective's range, per problem.
NOISE_FRACTION: dict[str, float] = {
    "branincurrin": 0.05,
    "dtlz2": 0.10,
    "zdt1": 0.10,
    "vehiclesafety": 0.01,
    "dtlz2m4": 0.10,
    "mixedbc": 0.05,
}
#: Every problem name ``make_problem`` understands (add ``-noisy`` for the noisy variant).
PROBLEM_NAMES = ("branincurrin", "dtlz2", "zdt1", "vehiclesafety", "dtlz2m4", "mixedbc", "zeus",
                 "zeus4")
#: ``mixedbc``: what each category does to BraninCurrin's inputs (``b`` mirrors ``x0``, so
#: it reaches the same front), and what category ``c`` and each integer step above 1 add
#: to the objectives (both dominated: the front stays BraninCurrin's).
MIXED_KINDS = ("a", "b", "c")
MIXED_SHIFT_C = (20.0, 1.0)
MIXED_STEP_N = (10.0, 0.5)
#: Where the Zeus traces live, relative to the repository root.
DEFAULT_ZEUS_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "zeus-traces"


@dataclass
class Problem:
    """A minimisation problem with a scoring rule.

    Attributes:
        name: Problem name (``"dtlz2-noisy"``...).
        space: The ecopt search space (what every method searches).
        objective_names: Names of the objectives (all minimised).
        ref_point: Reference point in the objectives' units (minimisation form).
        max_hv: Maximal hypervolume w.r.t. ``ref_point`` (in scoring units).
        true_fn: params -> true objective values (noiseless / expected).
        observe_fn: (params, rng) -> the values the optimiser sees.
        noise_sd: Per-objective noise standard deviation (0 when noiseless).
        score_scale: Objectives are divided by this before scoring (1 = raw units).
        n_obj: Number of objectives.
        budget: Default evaluation budget for the full run.
        notes: Free text for the report.
    """

    name: str
    space: ecopt.SearchSpace
    objective_names: list[str]
    ref_point: np.ndarray
    max_hv: float
    true_fn: Callable[[dict[str, Any]], np.ndarray]
    observe_fn: Callable[[dict[str, Any], np.random.Generator], np.ndarray]
    noise_sd: np.ndarray
    score_scale: np.ndarray | None = None
    budget: int = 100
    notes: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_obj(self) -> int:
        return len(self.objective_names)

    @property
    def dim(self) -> int:
        return self.space.dim

    @property
    def n_init(self) -> int:
        """The shared initial design size, ``2 (d + 1)``."""
        return 2 * (self.dim + 1)

    def objectives(self, with_thresholds: bool = True) -> list[ecopt.Objective]:
        """ecopt objectives (minimised); thresholds are the reference point when known."""
        return [ecopt.Objective(n, "min", float(r) if with_thresholds else None)
                for n, r in zip(self.objective_names, self.ref_point)]

    def hypervolume(self, Y_true: np.ndarray) -> float:
        """Hypervolume of true objective values ``(n, M)`` in scoring units."""
        Y = np.asarray(Y_true, dtype=float).reshape(-1, self.n_obj)
        if Y.shape[0] == 0:
            return 0.0
        s = self.score_scale if self.score_scale is not None else np.ones(self.n_obj)
        return pareto.hypervolume(Y / s, self.ref_point / s, ["min"] * self.n_obj)

    def log_gap(self, hv: float, floor: float = 1e-9) -> float:
        """``log10(max_hv - hv)``, floored at ``log10(floor * max_hv)`` (exact front found)."""
        return float(np.log10(max(self.max_hv - hv, floor * self.max_hv)))


def _unit_space(dim: int) -> ecopt.SearchSpace:
    return ecopt.SearchSpace({f"x{i}": ecopt.Float(0.0, 1.0) for i in range(dim)})


def _botorch_problem(base: str, noisy: bool) -> Problem:
    import torch
    from botorch.test_functions import multi_objective as mo

    ctor: dict[str, Callable[[], Any]] = {
        "branincurrin": lambda: mo.BraninCurrin(),
        "dtlz2": lambda: mo.DTLZ2(dim=6, num_objectives=2),
        "zdt1": lambda: mo.ZDT1(dim=6, num_objectives=2),
        "vehiclesafety": lambda: mo.VehicleSafety(),
        "dtlz2m4": lambda: mo.DTLZ2(dim=6, num_objectives=4),
    }
    fn = ctor[base]()
    d, M = int(fn.dim), int(fn.num_objectives)
    lo, hi = fn.bounds[0].double(), fn.bounds[1].double()
    ref = np.asarray(fn.ref_point, dtype=float)  # minimisation form (negate=False)
    max_hv = float(fn.max_hv)
    names = [f"f{j + 1}" for j in range(M)]
    keys = [f"x{i}" for i in range(d)]

    def true_fn(params: dict[str, Any]) -> np.ndarray:
        u = torch.tensor([[float(params[k]) for k in keys]], dtype=torch.double)
        with torch.no_grad():
            return fn.evaluate_true(lo + u * (hi - lo)).numpy()[0].astype(float)

    # Each objective's range over the domain, from a fixed Sobol sample.
    from scipy.stats import qmc

    U = torch.tensor(qmc.Sobol(d, scramble=True, seed=1234).random(4096), dtype=torch.double)
    with torch.no_grad():
        F = fn.evaluate_true(lo + U * (hi - lo)).numpy()
    frac = NOISE_FRACTION[base] if noisy else 0.0
    noise_sd = frac * (F.max(axis=0) - F.min(axis=0))

    def observe_fn(params: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
        y = true_fn(params)
        return y + noise_sd * rng.standard_normal(M) if noisy else y

    return Problem(
        name=base + ("-noisy" if noisy else ""), space=_unit_space(d), objective_names=names,
        ref_point=ref, max_hv=max_hv, true_fn=true_fn, observe_fn=observe_fn, noise_sd=noise_sd,
        budget=100 if M == 2 else 60,
        notes=(f"botorch.test_functions.multi_objective.{type(fn).__name__}"
               f"(dim={d}, M={M}); noise sd {frac:.0%} of each objective's range"
               if noisy else f"botorch {type(fn).__name__} (dim={d}, M={M}), noiseless"),
    )


def _mixed_problem(noisy: bool) -> Problem:
    """BraninCurrin on a mixed space: ``x0``, ``x1`` in [0, 1], ``kind`` in a/b/c, ``n`` in 1..4.

    ``kind="a"`` is BraninCurrin at ``(x0, x1)``, ``"b"`` at ``(1 - x0, x1)`` (the same
    set of values, so the same front), ``"c"`` adds :data:`MIXED_SHIFT_C`; each step of
    ``n`` above 1 adds :data:`MIXED_STEP_N`. Every point off ``kind in (a, b), n = 1``
    is dominated by one on it, so the reference point and maximal hypervolume are
    BraninCurrin's; a search must learn the category and the integer as well.
    """
    bc = _botorch_problem("branincurrin", noisy=False)
    space = ecopt.SearchSpace({"x0": ecopt.Float(0.0, 1.0), "x1": ecopt.Float(0.0, 1.0),
                               "kind": ecopt.Categorical(list(MIXED_KINDS)),
                               "n": ecopt.Int(1, 4)})

    def true_fn(params: dict[str, Any]) -> np.ndarray:
        x0 = float(params["x0"])
        y = bc.true_fn({"x0": 1.0 - x0 if params["kind"] == "b" else x0,
                        "x1": float(params["x1"])})
        if params["kind"] == "c":
            y = y + np.asarray(MIXED_SHIFT_C)
        return y + (int(params["n"]) - 1) * np.asarray(MIXED_STEP_N)

    frac = NOISE_FRACTION["mixedbc"] if noisy else 0.0
    rng = np.random.default_rng(1234)
    F = np.array([true_fn(space.decode(u)) for u in rng.random((4096, space.dim))])
    noise_sd = frac * (F.max(axis=0) - F.min(axis=0))

    def observe_fn(params: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
        y = true_fn(params)
        return y + noise_sd * rng.standard_normal(2) if noisy else y

    return Problem(
        name="mixedbc" + ("-noisy" if noisy else ""), space=space,
        objective_names=["f1", "f2"], ref_point=bc.ref_point, max_hv=bc.max_hv,
        true_fn=true_fn, observe_fn=observe_fn, noise_sd=noise_sd, budget=100,
        notes="BraninCurrin on a mixed space (floats x0, x1; categorical kind a/b/c; "
              f"integer n 1..4), front through kind a or b at n = 1; noise sd {frac:.0%} "
              "of each objective's range" if noisy else
              "BraninCurrin on a mixed space (floats x0, x1; categorical kind a/b/c; "
              "integer n 1..4), front through kind a or b at n = 1, noiseless")


def make_problem(name: str, zeus_dir: str | Path | None = None,
                 zeus_options: dict[str, Any] | None = None) -> Problem:
    """A problem by name: one of :data:`PROBLEM_NAMES`, optionally with ``-noisy``.

    ``zeus`` and ``zeus4`` are noisy by nature (epochs to target are sampled
    from the trace's repeated runs); ``zeus-noisy`` is the same problem.

    Raises:
        ValueError: for an unknown name.
    """
    base, _, suffix = name.partition("-")
    if base not in PROBLEM_NAMES or suffix not in ("", "noisy"):
        raise ValueError(f"unknown problem {name!r}; expected one of {list(PROBLEM_NAMES)} "
                         "optionally followed by '-noisy'")
    if base in ("zeus", "zeus4"):
        from benchmarks.zeus import OBJECTIVES, OBJECTIVES_4, ZeusTrace

        trace = ZeusTrace.load(zeus_dir or DEFAULT_ZEUS_DIR, **(zeus_options or {}))
        return trace.problem(OBJECTIVES_4 if base == "zeus4" else OBJECTIVES)
    if base == "mixedbc":
        return _mixed_problem(suffix == "noisy")
    return _botorch_problem(base, suffix == "noisy")


def default_problems(quick: bool) -> list[str]:
    """The problem list of a run (every problem noiseless and noisy; Zeus once)."""
    names: list[str] = []
    for p in PROBLEM_NAMES:
        if p.startswith("zeus"):
            names.append(p)
        else:
            names += [p, f"{p}-noisy"]
    return names


def true_front_min(Y: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Row mask of the non-dominated rows of a minimisation table."""
    return pareto.non_dominated(np.asarray(Y, dtype=float), ["min"] * np.asarray(Y).shape[1])
