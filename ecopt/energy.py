"""Energy metrics users optimise, and repeated measurements with their noise.

* :func:`samples_per_joule`, :func:`joules_per_sample`, :func:`tokens_per_joule`:
  efficiency from a count and joules, or from a trial's phase.
* :func:`lifecycle_energy_j`: training + N x inference, N the number of
  inferences (samples) the model serves in its life.
* :func:`repeat_phase`: run an inference phase k times, report the trimmed mean
  and a 95% interval, and record the noise on the trial (``trial.set_noise``)
  so model-based samplers (qLogNEHVI/qNEHVI) fit with observed noise.

Where energy comes from an estimate (``measured=False``), samples/J is nearly
throughput times a constant; :func:`provenance` says which it is.

Example:
    >>> def objective(trial):
    ...     with trial.phase("train", samples=len(X)):
    ...         model = fit(X, y, lr=trial["lr"])
    ...     stats = ecopt.energy.repeat_phase(
    ...         trial, "inference", lambda: model.predict(X_test), k=5,
    ...         samples=len(X_test), metric="samples_per_joule")
    ...     return {"accuracy": score(model), "samples_per_joule": stats.mean,
    ...             "lifecycle_j": ecopt.energy.lifecycle_energy_j(trial, n_inferences=1e6)}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ecopt._types import is_finite_number

__all__ = [
    "samples_per_joule",
    "joules_per_sample",
    "tokens_per_joule",
    "lifecycle_energy_j",
    "trimmed_mean_ci",
    "RepeatResult",
    "repeat_phase",
    "provenance",
    "accuracy_sd",
]

_QUANTITIES = ("samples_per_joule", "joules_per_sample", "energy_j", "duration_s")


def _check_count(name: str, n: Any) -> float:
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not is_finite_number(n) or n < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {n!r}")
    return float(n)


def _check_energy(energy_j: Any) -> float:
    if isinstance(energy_j, bool) or not isinstance(energy_j, (int, float)) \
            or not is_finite_number(energy_j) or energy_j < 0:
        raise ValueError(f"energy_j must be a finite number >= 0, got {energy_j!r}")
    return float(energy_j)


def _phase_of(source: Any, phase: str) -> Any:
    """A PhaseRecord from a live Trial or a TrialRecord."""
    phases = getattr(source, "phases", None)
    if phases is None:
        raise ValueError(f"expected a Trial or TrialRecord, got {source!r}")
    if phase not in phases:
        raise ValueError(f"no phase {phase!r} was measured; measured phases: {list(phases)}")
    return phases[phase]


def samples_per_joule(samples: float | Any, energy_j: float | None = None, *,
                      phase: str | None = None) -> float:
    """Items processed per joule.

    Either ``samples_per_joule(n, energy_j)`` or
    ``samples_per_joule(trial_or_record, phase="inference")`` (uses the
    phase's ``samples`` and energy).

    Raises:
        ValueError: for negative counts, no sample count, or zero energy.
    """
    if phase is not None:
        p = _phase_of(samples, phase)
        if p.samples is None:
            raise ValueError(f"phase {phase!r} has no sample count; pass samples= to trial.phase()")
        n, e = float(p.samples), p.energy_j
    else:
        if energy_j is None:
            raise ValueError("give energy_j, or a trial/record with phase=")
        n, e = _check_count("samples", samples), _check_energy(energy_j)
    if e <= 0:
        raise ValueError(f"energy_j > 0 must hold for samples/J, got {e} (a meter with no "
                         "energy components, e.g. 'wallclock'?)")
    return n / e


def joules_per_sample(samples: float | Any, energy_j: float | None = None, *,
                      phase: str | None = None) -> float:
    """Joules per item processed (the inverse of :func:`samples_per_joule`).

    Raises:
        ValueError: for a zero or missing sample count, or negative energy.
    """
    if phase is not None:
        p = _phase_of(samples, phase)
        if not p.samples:
            raise ValueError(f"phase {phase!r} has no (or zero) sample count")
        return p.energy_j / float(p.samples)
    if energy_j is None:
        raise ValueError("give energy_j, or a trial/record with phase=")
    n, e = _check_count("samples", samples), _check_energy(energy_j)
    if n <= 0:
        raise ValueError(f"samples > 0 must hold for J/sample, got {samples}")
    return e / n


def tokens_per_joule(tokens: float | Any, energy_j: float | None = None, *,
                     phase: str | None = None) -> float:
    """Generated tokens per joule (pass tokens as the phase's ``samples``)."""
    return samples_per_joule(tokens, energy_j, phase=phase)


def lifecycle_energy_j(training: float | Any, inference_j_per_sample: float | None = None,
                       n_inferences: float = 0.0, *, train_phase: str = "train",
                       inference_phase: str = "inference") -> float:
    """Training energy + ``n_inferences`` x inference energy per sample.

    Either ``lifecycle_energy_j(train_j, j_per_sample, n_inferences=N)`` or
    ``lifecycle_energy_j(trial_or_record, n_inferences=N)``, which takes the
    ``train_phase`` energy and the ``inference_phase``'s J/sample.

    Args:
        training: Training joules, or a Trial / TrialRecord.
        inference_j_per_sample: Joules per inference (numbers form only).
        n_inferences: How many inferences the model serves (``N >= 0``).

    Raises:
        ValueError: for negative numbers or missing phases.
    """
    n = _check_count("n_inferences", n_inferences)
    if isinstance(training, (int, float)) and not isinstance(training, bool):
        if inference_j_per_sample is None:
            raise ValueError("give inference_j_per_sample with a numeric training energy")
        return _check_energy(training) + n * _check_energy(inference_j_per_sample)
    train_j = _phase_of(training, train_phase).energy_j
    if n == 0:
        return float(train_j)
    return float(train_j) + n * joules_per_sample(training, phase=inference_phase)


def provenance(source: Any, phase: str | None = None) -> str:
    """``"measured"``, ``"estimated"`` or ``"mixed"`` for a trial, record or one of its phases."""
    phases = [_phase_of(source, phase)] if phase is not None else \
        list(getattr(source, "phases", {}).values())
    flags = [c.measured for p in phases for c in p.measurement.components.values()]
    if not flags:
        return "none"
    if all(flags):
        return "measured"
    return "estimated" if not any(flags) else "mixed"


def accuracy_sd(accuracy: float, n: int) -> float:
    """Standard error of an accuracy measured on ``n`` test samples: ``sqrt(p (1 - p) / n)``.

    Report it with ``trial.set_noise("accuracy", accuracy_sd(acc, len(X_test)))`` next to
    :func:`repeat_phase`'s noise, so every objective of the trial carries a noise level
    (qLogNEHVI/qNEHVI use observed noise only when all objectives report one).

    Raises:
        ValueError: for ``accuracy`` outside [0, 1] or ``n < 1``.
    """
    if not (isinstance(accuracy, (int, float)) and 0.0 <= accuracy <= 1.0):
        raise ValueError(f"accuracy must be in [0, 1], got {accuracy!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n >= 1 must hold, got n={n!r}")
    return math.sqrt(accuracy * (1.0 - accuracy) / n)


def trimmed_mean_ci(values: Sequence[float], trim: float = 0.1, confidence: float = 0.95
                    ) -> tuple[float, float, float, float]:
    """Trimmed mean, its confidence interval and standard error (Tukey-McLaughlin).

    The standard error comes from the winsorised variance,
    ``se = s_w / ((1 - 2g) sqrt(n))``, with Student's t on ``n - 2k - 1``
    degrees of freedom (``k = floor(g n)`` values cut from each end).

    Args:
        values: At least one finite number.
        trim: Fraction cut from each end, in ``[0, 0.5)``.
        confidence: Interval level in ``(0, 1)``.

    Returns:
        ``(mean, low, high, se)``; with one value (or no spread) the interval
        collapses to the mean and ``se`` is 0.

    Raises:
        ValueError: for an empty list, non-finite values or bad trim/confidence.
    """
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("values must hold at least one number, got []")
    if not all(math.isfinite(x) for x in xs):
        raise ValueError(f"values must be finite, got {list(values)!r}")
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = len(xs)
    k = int(math.floor(trim * n))
    kept = xs[k:n - k]
    mean = sum(kept) / len(kept)
    dof = n - 2 * k - 1
    if n < 2 or dof < 1:
        return mean, mean, mean, 0.0
    wins = [min(max(x, xs[k]), xs[n - k - 1]) for x in xs]
    wmean = sum(wins) / n
    s_w = math.sqrt(sum((x - wmean) ** 2 for x in wins) / (n - 1))
    se = s_w / ((1 - 2 * k / n) * math.sqrt(n))
    from scipy import stats

    t = float(stats.t.ppf(0.5 + confidence / 2, dof))
    return mean, mean - t * se, mean + t * se, se


@dataclass(frozen=True)
class RepeatResult:
    """Statistics of k repeats of a phase.

    Attributes:
        metric: What was computed per repeat (``samples_per_joule``...).
        values: One value per repeat, in order.
        mean: Trimmed mean.
        ci_low, ci_high: The confidence interval of the trimmed mean.
        se: Standard error of the trimmed mean (recorded as the trial's noise sd).
        sd: Sample standard deviation of the values (spread of one repeat).
        trim: Fraction trimmed from each end.
        confidence: Interval level.
        measured: Whether every repeat's energy was measured (not estimated).
    """

    metric: str
    values: list[float]
    mean: float
    ci_low: float
    ci_high: float
    se: float
    sd: float
    trim: float
    confidence: float
    measured: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "values": list(self.values), "mean": self.mean,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "se": self.se, "sd": self.sd,
                "trim": self.trim, "confidence": self.confidence, "measured": self.measured,
                "k": len(self.values)}


def repeat_phase(trial: Any, phase: str, fn: Callable[[], Any], k: int = 5, *,
                 samples: int | None = None, metric: str = "samples_per_joule",
                 report_as: str | None = None, trim: float = 0.1, confidence: float = 0.95,
                 set_noise: bool = True) -> RepeatResult:
    """Run ``fn`` k times, each in ``trial.phase(phase)``, and summarise the repeats.

    The phase record sums all k windows (``count == k``), so the log keeps the
    total; each repeat's own value is the difference of the phase's energy and
    duration before and after it.

    Args:
        trial: The live :class:`~ecopt.Trial`.
        phase: Phase name (e.g. ``"inference"``).
        fn: The work of one repeat (called with no arguments).
        k: Repeats (``>= 1``; ``>= 3`` for a meaningful interval).
        samples: Items processed by one repeat (needed for per-sample metrics).
        metric: ``samples_per_joule``, ``joules_per_sample``, ``energy_j`` or
            ``duration_s`` per repeat.
        report_as: Objective/metric name whose noise is recorded (default:
            ``metric``).
        trim: Fraction trimmed from each end for the mean.
        confidence: Interval level.
        set_noise: Record ``se`` with ``trial.set_noise(report_as, se)``, so
            the sampler models this objective with observed noise.

    Returns:
        A :class:`RepeatResult`; also stored as ``trial.user_attrs["repeats:<phase>"]``.

    Raises:
        ValueError: for bad ``k``, unknown metric, or a per-sample metric
            without ``samples``.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k >= 1 must hold, got k={k!r}")
    if metric not in _QUANTITIES:
        raise ValueError(f"metric must be one of {list(_QUANTITIES)}, got {metric!r}")
    if metric in ("samples_per_joule", "joules_per_sample") and not samples:
        raise ValueError(f"metric {metric!r} needs samples= (items processed per repeat)")
    values: list[float] = []
    measured = True
    for _ in range(k):
        e0 = trial.energy_j(phase) if phase in trial.phases else 0.0
        d0 = trial.duration_s(phase) if phase in trial.phases else 0.0
        with trial.phase(phase, samples=samples):
            fn()
        e = trial.energy_j(phase) - e0
        d = trial.duration_s(phase) - d0
        measured = measured and trial.measurement(phase).measured
        if metric == "samples_per_joule":
            if e <= 0:
                raise ValueError(f"repeat of phase {phase!r} used {e} J; samples/J is undefined "
                                 "(a meter with no energy components?)")
            values.append(samples / e)  # type: ignore[operator]
        elif metric == "joules_per_sample":
            values.append(e / samples)  # type: ignore[operator]
        elif metric == "energy_j":
            values.append(e)
        else:
            values.append(d)
    mean, lo, hi, se = trimmed_mean_ci(values, trim, confidence)
    sd = float(_stdev(values))
    res = RepeatResult(metric, values, mean, lo, hi, se, sd, trim, confidence, measured)
    name = report_as or metric
    if set_noise:
        trial.set_noise(name, se)
    trial.set_user_attr(f"repeats:{phase}", {**res.to_dict(), "reported_as": name})
    return res


def _stdev(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
