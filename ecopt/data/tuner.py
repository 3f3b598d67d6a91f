"""A hill-climbing tuner over parallelism and prefetch, in the manner of tf.data's autotuner.

tf.data's ``AUTOTUNE`` (the ``HILL_CLIMB`` algorithm) starts every tunable
knob at its minimum and, step by step, raises by one the knob whose increase
its performance model predicts helps most, while the parallelism stays within
its CPU budget (by default, the cores) and the buffers within the RAM budget;
it never caches and never changes what a stage computes. :func:`hill_climb`
does the same on a DataLoader pipeline's knobs (worker processes, threads per
per-sample stage, prefetch), costed with :func:`~ecopt.data.allocation.predict_epochs`,
the model the LP allocation uses, so the two differ only in how they search
and what they may change (the LP also places a cache and picks the backend,
and may give waiting stages threads past the core count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ecopt.data.allocation import PipelineProfile, PipelineSetting, predict_epochs

__all__ = ["TunerResult", "hill_climb"]


@dataclass
class TunerResult:
    """Where the hill-climb stopped.

    Attributes:
        setting: The final knobs.
        predicted_total_s: Predicted seconds over the epochs.
        steps: ``(knob changed, predicted total seconds after the step)``, in order.
    """

    setting: PipelineSetting
    predicted_total_s: float
    steps: list[tuple[str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting.to_dict(), "predicted_total_s": self.predicted_total_s,
                "steps": [list(s) for s in self.steps]}


def hill_climb(profile: PipelineProfile, start: PipelineSetting, cores: float, epochs: int,
               memory_limit_bytes: float = math.inf, max_prefetch: int = 8,
               min_gain: float = 0.01, max_steps: int = 200) -> TunerResult:
    """Raise one knob at a time while the model predicts a gain (tf.data-style autotuning).

    Knobs: ``num_workers`` (at most ``ceil(cores)``), threads of each
    per-sample stage (at most ``ceil(cores)`` each: the CPU budget bounds
    parallelism, as in tf.data) and ``prefetch_factor`` (at most
    ``max_prefetch``, with the buffers within ``memory_limit_bytes``). The
    backend and the cache stay as in ``start``.

    Args:
        profile: The traced pipeline.
        start: The setting to climb from (its knobs are the starting values).
        cores: Cores available (the CPU budget).
        epochs: Epochs the prediction covers.
        memory_limit_bytes: Most bytes the prefetch buffers may keep.
        max_prefetch: Largest ``prefetch_factor``.
        min_gain: Smallest relative predicted gain that justifies a step.
        max_steps: Most steps.

    Returns:
        The :class:`TunerResult`.

    Raises:
        ValueError: for ``epochs < 1``, non-positive ``cores`` or a negative ``min_gain``.
    """
    if epochs < 1 or cores <= 0 or min_gain < 0:
        raise ValueError(f"epochs >= 1, cores > 0 and min_gain >= 0 must hold, got "
                         f"epochs={epochs}, cores={cores}, min_gain={min_gain}")
    budget = int(math.ceil(cores))

    def cost(s: PipelineSetting) -> float:
        return sum(predict_epochs(profile, s, epochs, cores))

    def fits(s: PipelineSetting) -> bool:
        return s.num_workers * s.prefetch_factor * profile.batch_bytes <= memory_limit_bytes

    cur, cur_t = start, cost(start)
    steps: list[tuple[str, float]] = []
    for _ in range(max_steps):
        moves: list[tuple[str, PipelineSetting]] = []
        if cur.num_workers < budget:
            moves.append(("num_workers", replace(cur, num_workers=cur.num_workers + 1)))
        if cur.num_workers > 0 and cur.prefetch_factor < max_prefetch:
            moves.append(("prefetch_factor", replace(cur, prefetch_factor=cur.prefetch_factor + 1)))
        for st in profile.sample:
            t = cur.threads(st.name)
            if t < budget:
                th = dict(cur.stage_threads)
                th[st.name] = t + 1
                moves.append((f"{st.name} threads", replace(
                    cur, stage_threads=tuple((s.name, th[s.name]) for s in profile.sample
                                             if s.name in th))))
        scored = sorted(((cost(s), name, s) for name, s in moves if fits(s)),
                        key=lambda r: r[0])
        if not scored or scored[0][0] > cur_t * (1 - min_gain):
            break
        cur_t, name, cur = scored[0]
        steps.append((name, cur_t))
    return TunerResult(cur, cur_t, steps)
