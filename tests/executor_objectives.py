"""Module-level objectives (and a pruner) for the executor, fault and pruning tests.

Objectives sent to worker processes must be importable there, so they live in
this plain module (``tests/`` is on ``sys.path``, see ``tests/conftest.py``,
and worker processes inherit ``sys.path``), not in test files, which pytest
imports under private names.
Every objective here takes a two-parameter space ``x, y`` in ``[0, 1]`` and
returns two objectives to minimise (a ZDT1-like front), except :func:`failing_corner`
(the mixed space of :func:`corner_study`).
"""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import ecopt
from ecopt.errors import TrialPruned
from ecopt.pruners.base import Decision, Pruner
from ecopt.trial import Trial

__all__ = ["zdt1", "quick", "typo", "Sleepy", "VariableSleep", "ZDT1Sleep", "Leader", "PidThenSleep", "Suicide",
           "report_env", "pending_seen", "Curve", "OddTrialsPruner", "SleepByNumber",
           "in_failing_corner", "failing_corner", "corner_study", "every_ending"]


def zdt1(x: float, y: float) -> dict[str, float]:
    """ZDT1 on two variables (both minimised; the front is ``f2 = 1 - sqrt(f1)`` at ``y = 0``)."""
    g = 1.0 + 9.0 * y
    return {"f1": x, "f2": g * (1.0 - math.sqrt(x / g))}


def quick(trial: Trial) -> dict[str, float]:
    """ZDT1 at once."""
    return zdt1(float(trial["x"]), float(trial["y"]))



def _work(trial: Trial, duration_s: float, busy: bool) -> None:
    """A ``work`` phase of ``duration_s`` seconds: this thread's CPU time when ``busy``
    (fixed compute), else a sleep."""
    with trial.phase("work"):
        if busy:
            end = time.thread_time() + duration_s
            while time.thread_time() < end:
                pass
        else:
            time.sleep(duration_s)

class Sleepy:
    """ZDT1 after sleeping ``duration_s`` (a trial of controlled length).

    Args:
        duration_s: Seconds each trial takes.
        hang_numbers: Trial numbers that sleep ``hang_s`` instead (a hung trial).
        hang_s: How long a hung trial sleeps.
        busy: Spin the CPU for ``duration_s`` of CPU time instead of sleeping
            (fixed compute per trial: slower when trials share too few cores).
    """

    def __init__(self, duration_s: float = 0.2, hang_numbers: tuple[int, ...] = (),
                 hang_s: float = 3600.0, busy: bool = False) -> None:
        self.duration_s = duration_s
        self.hang_numbers = tuple(hang_numbers)
        self.hang_s = hang_s
        self.busy = busy

    def __call__(self, trial: Trial) -> dict[str, float]:
        d = self.hang_s if trial.number in self.hang_numbers else self.duration_s
        _work(trial, d, self.busy)
        return zdt1(float(trial["x"]), float(trial["y"]))


class VariableSleep:
    """ZDT1 after ``base_s + span_s * x`` seconds: trial length depends on the configuration.

    Unequal trial lengths are what make asynchronous proposals pay: a
    synchronous batch waits for its slowest trial.
    """

    def __init__(self, base_s: float = 0.3, span_s: float = 1.2, busy: bool = False) -> None:
        self.base_s = base_s
        self.span_s = span_s
        self.busy = busy

    def __call__(self, trial: Trial) -> dict[str, float]:
        d = self.base_s + self.span_s * float(trial["x"])
        _work(trial, d, self.busy)
        return zdt1(float(trial["x"]), float(trial["y"]))


class ZDT1Sleep:
    """ZDT1 on ``x0 .. x{d-1}`` after ``base_s + span_s * x0`` seconds (benchmarks).

    Args:
        base_s: Shortest trial.
        span_s: Extra seconds at ``x0 = 1`` (trial length depends on the configuration).
    """

    def __init__(self, base_s: float = 1.0, span_s: float = 4.0) -> None:
        self.base_s = base_s
        self.span_s = span_s

    def __call__(self, trial: Trial) -> dict[str, float]:
        xs = [float(trial.params[k]) for k in sorted(trial.params)]
        with trial.phase("work"):
            time.sleep(self.base_s + self.span_s * xs[0])
        g = 1.0 + 9.0 * sum(xs[1:]) / max(len(xs) - 1, 1)
        return {"f1": xs[0], "f2": g * (1.0 - math.sqrt(xs[0] / g))}


class Leader:
    """Trial ``leader`` marks its start in ``<dir>/leader`` and runs ``leader_s``; later
    trials wait for that mark, then run ``others_s``, so they overlap it for sure.
    """

    def __init__(self, directory: str | os.PathLike[str], leader: int = 1,
                 leader_s: float = 2.5, others_s: float = 0.2) -> None:
        self.directory = str(directory)
        self.leader = leader
        self.leader_s = leader_s
        self.others_s = others_s

    def __call__(self, trial: Trial) -> dict[str, float]:
        mark = Path(self.directory) / "leader"
        if trial.number == self.leader:
            mark.touch()
            time.sleep(self.leader_s)
        else:
            end = time.monotonic() + 120
            while trial.number > self.leader and not mark.exists() and time.monotonic() < end:
                time.sleep(0.01)
            time.sleep(self.others_s)
        return zdt1(float(trial["x"]), float(trial["y"]))


class PidThenSleep:
    """Write ``<dir>/<number>.pid`` then sleep; a test kills that process.

    Args:
        directory: Where the pid files go.
        victim: The trial number that sleeps ``victim_s`` (long enough to be killed).
        duration_s: How long other trials sleep.
        victim_s: How long the victim sleeps.
    """

    def __init__(self, directory: str | os.PathLike[str], victim: int = 1,
                 duration_s: float = 0.2, victim_s: float = 120.0) -> None:
        self.directory = str(directory)
        self.victim = victim
        self.duration_s = duration_s
        self.victim_s = victim_s

    def __call__(self, trial: Trial) -> dict[str, float]:
        path = Path(self.directory) / f"{trial.number}.pid"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(str(os.getpid()))
        tmp.replace(path)
        time.sleep(self.victim_s if trial.number == self.victim else self.duration_s)
        return zdt1(float(trial["x"]), float(trial["y"]))


class Suicide:
    """Trial ``victim`` kills its own worker process with SIGKILL; others return ZDT1 after 0.1 s."""

    def __init__(self, victim: int = 0) -> None:
        self.victim = victim

    def __call__(self, trial: Trial) -> dict[str, float]:
        if trial.number == self.victim:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.1)
        return zdt1(float(trial["x"]), float(trial["y"]))


def report_env(trial: Trial) -> dict[str, float]:
    """ZDT1, with the worker's ``CUDA_VISIBLE_DEVICES`` and pid as user attributes."""
    trial.set_user_attr("cuda_visible_devices", os.environ.get("CUDA_VISIBLE_DEVICES"))
    trial.set_user_attr("pid", os.getpid())
    with trial.phase("work"):
        time.sleep(0.2 + 0.3 * (trial.number % 2))  # unequal, so trials end one at a time
    return zdt1(float(trial["x"]), float(trial["y"]))


def pending_seen(trial: Trial) -> dict[str, Any]:
    """ZDT1 after 0.3 s (for async-proposal tests, which inspect the sampler's inputs)."""
    time.sleep(0.3)
    return zdt1(float(trial["x"]), float(trial["y"]))


class Curve:
    """ZDT1 approached over ``steps`` epochs: reports ``f1``/``f2`` each epoch, stops when told.

    Each epoch is a ``train`` phase of ``epoch_s`` seconds of this thread's CPU
    time; ``f2`` starts 1.0 above its final value and closes in as ``1/epoch``.
    """

    def __init__(self, steps: int = 5, epoch_s: float = 0.01) -> None:
        self.steps = steps
        self.epoch_s = epoch_s

    def __call__(self, trial: Trial) -> dict[str, float]:
        final = zdt1(float(trial["x"]), float(trial["y"]))
        for epoch in range(1, self.steps + 1):
            with trial.phase("train", samples=10):
                end = time.thread_time() + self.epoch_s
                while time.thread_time() < end:
                    pass
            now = {"f1": final["f1"], "f2": final["f2"] + 1.0 / epoch}
            trial.report(epoch, now)
            if trial.should_stop():
                raise TrialPruned()
        return final


class OddTrialsPruner(Pruner):
    """Prunes odd-numbered trials at ``at_step`` (a deterministic pruner for tests)."""

    name = "odd-trials"

    def __init__(self, at_step: int = 2) -> None:
        super().__init__()
        self.at_step = at_step

    def decide(self, trial: Trial, history: Any) -> Decision:
        step = trial.intermediate[-1].step
        if trial.number % 2 == 1 and step >= self.at_step:
            return Decision(True, f"odd trial at step {step} (saw {len(history)} finished)",
                            {"step": step})
        return Decision(False)


class SleepByNumber:
    """ZDT1 after a ``work`` phase that sleeps ``durations[trial.number]`` (else ``default_s``)."""

    def __init__(self, durations: dict[int, float], default_s: float = 0.1) -> None:
        self.durations = dict(durations)
        self.default_s = default_s

    def __call__(self, trial: Trial) -> dict[str, float]:
        _work(trial, self.durations.get(trial.number, self.default_s), False)
        return zdt1(float(trial["x"]), float(trial["y"]))


def typo(trial: Trial) -> dict[str, float]:
    """A systematic bug: every trial fails the same way (``KeyError: 'c'``)."""
    return {"f1": trial["c"], "f2": 0.0}


#: The failing region of :func:`failing_corner`: ``kind == "c" and x > 0.8``.
def in_failing_corner(params: dict[str, Any]) -> bool:
    return params["kind"] == "c" and float(params["x"]) > 0.8


def failing_corner(trial: Trial) -> dict[str, float]:
    """The notebook of issue 36: kind "c" is best, higher x is better for f1, and the end
    of the front (``kind == "c" and x > 0.8``) raises (a NaN loss at one corner)."""
    x, kind, lr = float(trial["x"]), trial["kind"], float(trial["lr"])
    if in_failing_corner(trial.params):
        raise RuntimeError("NaN loss")
    bonus = {"a": 0.0, "b": 0.1, "c": 0.25}[kind]
    return {"f1": 1.0 - x - bonus + 0.02 * (math.log10(lr) + 2.5) ** 2, "f2": x ** 2 + 0.05}


def corner_study(**kw: Any) -> ecopt.Study:
    """The mixed space and sampler of the failing-corner tests (a cheaper optimiser)."""
    from ecopt.samplers import QLogNEHVISampler

    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1),
                               "kind": ecopt.Categorical(["a", "b", "c"]),
                               "lr": ecopt.Float(1e-4, 1e-1, log=True)})
    return ecopt.Study(space, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                       # a plain Sobol design: its first point lands in the failing corner
                       # (the centre point would not), so the study meets a failure early
                       sampler=QLogNEHVISampler(num_restarts=2, raw_samples=64,
                                                init_center=False),
                       meter="estimate", seed=0, **kw)


def every_ending(trial: Trial) -> dict[str, float]:
    """Each way a trial ends, by its number modulo 4 (the executor contract's objective).

    0: completes, with a ``work`` phase of 10 samples, one report, a metric and a user
    attribute; 1: raises ``ValueError``; 2: runs out of memory; 3: reports once and is
    pruned.
    """
    x, y = float(trial["x"]), float(trial["y"])
    kind = trial.number % 4
    if kind == 0:
        with trial.phase("work", samples=10):
            sum(i * i for i in range(20_000))
        trial.report(1, {"f1": x})
        trial.set_metric("half_x", x / 2)
        trial.set_user_attr("where", "worker")
        return zdt1(x, y)
    if kind == 1:
        raise ValueError(f"x={x} is bad")
    if kind == 2:
        raise MemoryError("out of memory (on purpose)")
    trial.report(1, zdt1(x, y))
    raise TrialPruned("stopped by the objective")
