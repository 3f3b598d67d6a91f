"""A ready objective: tokens per joule of text generation with a real transformers causal LM.

Models. By default a *small Gemma-3 architecture* built from
``transformers.Gemma3TextConfig`` with random weights
(``AutoModelForCausalLM.from_config``, initialised directly on the device):
nothing is downloaded, and tokens/J depends on the compute a forward pass
does, not on what the weights say. :data:`GEMMA3_PRESETS` holds the published
Gemma-3 text-model shapes (270M, 1B, 4B, 12B) for the same thing at real
scale. ``model_path`` loads real local weights instead
(``from_pretrained(path, local_files_only=True)``).

Measurement (:func:`measure_generation`, the one home of it; the objective
and any other integration call it). As in the ML.ENERGY benchmark and
optimum-benchmark, generation is split into its two regimes and each is
measured in its own meter windows:

* **prefill** (phase ``prefill``): one forward pass over the prompts, which
  yields each sequence's first token; reported as **joules per prompt**
  (``prefill_j_per_prompt``) and time to first token (``ttft_ms``).
* **decode** (phase ``decode``): the remaining ``max_new_tokens - 1`` steps,
  one token per sequence per step, with the KV cache (or without it:
  ``use_cache=False`` recomputes the whole sequence each step). The batch is
  static, so it is full for the whole window (no sequence stops early: EOS
  is not a stop condition), and kernels, allocator and cache were warmed up by
  a ``warmup`` phase first: the window is the steady state. Reported as
  **decode tokens per joule** (``decode_tokens_per_joule``).

**Windows many meter ticks long.** A meter's reading changes once per update
period (NVML's energy counter: measured when the meter starts, typically
20-100 ms), so a window one or two periods long can be off by a whole period.
Each window is therefore sized to at least
:data:`~ecopt.meters.base.MIN_WINDOW_PERIODS` (10) update periods, timed on the
warm-up: a prefill window repeats the pass (``prefill_repeats``), a decode
window repeats the whole decode from the same prefill cache (``decode_repeats``;
each repeat but the last decodes from a copy of the cache, made inside the
window: one copy of the prompt's keys and values per ``max_new_tokens - 1``
steps, counted as decode energy). Repeats are capped (``max_window_repeats``);
a window still shorter than 10 periods is flagged (``prefill_window_short``,
``decode_window_short`` = 1, the user attribute ``short_window`` says why, and
the meter flags its components ``short-window``). The window lengths are
recorded (``decode_window_s``, the shortest single windows
``decode_window_min_s`` and ``prefill_window_min_s``).

Rounds (prefill + decode) repeat until the decode windows add up to
``min_window_s``. ``tokens_per_joule`` is end to end: all generated tokens
over prefill + decode joules. Greedy decoding (argmax) is done by hand with
the model's forward pass and cache (what ``generate`` does, with the phase
boundary exposed); it matches ``model.generate(do_sample=False)`` token for
token.

The objective reads these params from the trial (missing ones take the
defaults of :class:`GenerationObjective`): ``batch_size``, ``max_new_tokens``,
``prompt_len``, ``dtype`` (``float32``/``bfloat16``/``float16``: the weights'
type), ``attn_implementation`` (``eager``/``sdpa``), ``use_cache`` and, for
the built-in architecture, ``hidden_size``, ``num_hidden_layers``,
``intermediate_size``, ``num_attention_heads``, ``num_key_value_heads``,
``vocab_size``, ``head_dim``. Besides the measurement's figures it records
``latency_per_token_ms`` (mean decode step), ``p95_latency_ms`` (95th
percentile over the decode steps and the prefills), ``tokens_per_s``,
``peak_memory_gb`` (``torch.cuda.max_memory_allocated`` on a GPU; on CPU the
process's peak RSS, interpreter included), ``peak_host_rss_gb``,
``peak_device_memory_gb`` (GPU) and ``predicted_memory_gb``
(:func:`predict_memory_gb`).

Out of memory: on a GPU a real ``torch.cuda.OutOfMemoryError`` makes the
trial *infeasible* (:func:`ecopt.workloads.device.trial_on_device`). On CPU a
real out-of-memory would take the machine down with it, so ``max_memory_gb``
emulates a memory ceiling: when :func:`predict_memory_gb` exceeds it the
objective raises :class:`ecopt.Infeasible` before generating (an emulated
VRAM limit, not a measured one; the record's error message says so).

Example:
    >>> objective = GenerationObjective(arch=GEMMA3_PRESETS["1b"], device="cuda",
    ...                                 dtype="bfloat16")
    >>> space = ecopt.SearchSpace({"batch_size": ecopt.Int(1, 65536, log=True)})
    >>> study = ecopt.Study(space, [ecopt.Objective("tokens_per_joule", "max"),
    ...                             ecopt.Objective("p95_latency_ms", "min")])
    >>> study.optimize(objective, n_trials=12)
"""

from __future__ import annotations

import copy
import inspect
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ecopt.errors import Infeasible
from ecopt.meters.base import MIN_WINDOW_PERIODS
from ecopt.trial import Trial
from ecopt.workloads.device import (
    is_cuda,
    place_model,
    resolve_device,
    synchronize,
    to_device,
    trial_on_device,
)

__all__ = ["GemmaArch", "GenerationObjective", "gemma3_config", "build_causal_lm",
           "predict_memory_gb", "arch_from_config", "count_parameters", "DTYPE_BYTES",
           "resolve_device", "GEMMA3_PRESETS", "GEMMA3_PUBLISHED_PARAMS", "gemma3_preset",
           "GenerationMeasurement", "measure_generation", "greedy_tokens",
           "max_batch_for_memory", "meter_update_period_s"]

#: Bytes per element of the dtypes the objective understands.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

_ARCH_PARAMS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "head_dim")


@dataclass(frozen=True)
class GemmaArch:
    """A Gemma-3 text architecture (the defaults are tiny: milliseconds per token on CPU).

    Attributes:
        vocab_size: Tokens in the vocabulary (the released models: 262,144 or 262,208).
        hidden_size: Model width.
        intermediate_size: MLP width.
        num_hidden_layers: Decoder layers.
        num_attention_heads: Query heads.
        num_key_value_heads: Key/value heads (grouped-query attention).
        head_dim: Per-head width (default ``hidden_size // num_attention_heads``).
        sliding_window: Local attention window of the sliding layers.
        max_position_embeddings: Longest sequence the rotary embedding is set up for.
        query_pre_attn_scalar: Attention scale denominator (default: the head width).
    """

    vocab_size: int = 1024
    hidden_size: int = 64
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    head_dim: int | None = None
    sliding_window: int = 128
    max_position_embeddings: int = 4096
    query_pre_attn_scalar: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "num_key_value_heads", "sliding_window",
                     "max_position_embeddings"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {name}={v!r}")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size must be a multiple of num_attention_heads (or give "
                             f"head_dim), got hidden_size={self.hidden_size}, "
                             f"num_attention_heads={self.num_attention_heads}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads must be a multiple of num_key_value_heads, got "
                             f"{self.num_attention_heads} and {self.num_key_value_heads}")
        for name in ("head_dim", "query_pre_attn_scalar"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"{name} >= 1 must hold, got {v}")

    @property
    def resolved_head_dim(self) -> int:
        return int(self.head_dim or self.hidden_size // self.num_attention_heads)

    @property
    def n_params(self) -> int:
        """Parameters of the model this architecture builds (counted from the shapes).

        Embedding (tied with the output layer) + per layer: q/k/v/o projections,
        the gated MLP's three matrices, four RMSNorms of the width and the q/k
        norms of the head width + the final norm. Equal to what
        ``count_parameters(build_causal_lm(arch))`` counts.
        """
        h, hd = self.hidden_size, self.resolved_head_dim
        per_layer = (h * hd * (2 * self.num_attention_heads + 2 * self.num_key_value_heads)
                     + 3 * h * self.intermediate_size + 4 * h + 2 * hd)
        return int(self.vocab_size * h + self.num_hidden_layers * per_layer + h)

    def with_params(self, params: dict[str, Any]) -> GemmaArch:
        """A copy with the architecture keys of ``params`` applied."""
        changes = {k: int(params[k]) for k in _ARCH_PARAMS if k in params}
        if not changes:
            return self
        d = asdict(self)
        d.update(changes)
        if ("hidden_size" in changes or "num_attention_heads" in changes) \
                and "head_dim" not in changes:
            d["head_dim"] = None  # re-derived from the new width
            d["query_pre_attn_scalar"] = None
        return GemmaArch(**d)


# The released Gemma-3 text models' shapes, from the config.json of each checkpoint on the
# Hugging Face Hub (google/gemma-3-270m, google/gemma-3-1b-pt, and the "text_config" of
# google/gemma-3-4b-pt and google/gemma-3-12b-pt; the same values appear in ungated copies,
# e.g. huggingface.co/Codingstark/gemma3-270m-leetcode, huggingface.co/MatanBT/mia-target-model
# (1B), huggingface.co/YFolla/gemma-3-dnd (4B text) and
# huggingface.co/OpenPipe/gemma-3-12b-it-text-only). Every layer pattern is 5 sliding : 1 global
# (Gemma3TextConfig's default). Not reproduced: the 4B/12B global layers' linear RoPE scaling
# (factor 8), which changes position encodings, not the compute or the memory.
GEMMA3_PRESETS: dict[str, GemmaArch] = {
    "270m": GemmaArch(vocab_size=262_144, hidden_size=640, intermediate_size=2048,
                      num_hidden_layers=18, num_attention_heads=4, num_key_value_heads=1,
                      head_dim=256, sliding_window=512, max_position_embeddings=32_768,
                      query_pre_attn_scalar=256),
    "1b": GemmaArch(vocab_size=262_144, hidden_size=1152, intermediate_size=6912,
                    num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1,
                    head_dim=256, sliding_window=512, max_position_embeddings=32_768,
                    query_pre_attn_scalar=256),
    "4b": GemmaArch(vocab_size=262_208, hidden_size=2560, intermediate_size=10_240,
                    num_hidden_layers=34, num_attention_heads=8, num_key_value_heads=4,
                    head_dim=256, sliding_window=1024, max_position_embeddings=131_072,
                    query_pre_attn_scalar=256),
    "12b": GemmaArch(vocab_size=262_208, hidden_size=3840, intermediate_size=15_360,
                     num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=8,
                     head_dim=256, sliding_window=1024, max_position_embeddings=131_072,
                     query_pre_attn_scalar=256),
}

#: Published parameter counts of the text models (the presets match them within 0.01%;
#: the 4B count was published with the 262,144-token vocabulary, the config has 262,208).
GEMMA3_PUBLISHED_PARAMS: dict[str, int] = {"1b": 999_885_952, "4b": 3_880_099_328}


def gemma3_preset(name: str) -> GemmaArch:
    """The architecture of a released Gemma-3 text model (``270m``, ``1b``, ``4b``, ``12b``).

    Raises:
        ValueError: for an unknown name.
    """
    key = str(name).lower()
    if key not in GEMMA3_PRESETS:
        raise ValueError(f"preset must be one of {list(GEMMA3_PRESETS)}, got {name!r}")
    return GEMMA3_PRESETS[key]


def gemma3_config(arch: GemmaArch | None = None, max_position_embeddings: int | None = None
                  ) -> Any:
    """A ``transformers.Gemma3TextConfig`` for ``arch`` (Gemma 3's layer pattern and norms).

    ``query_pre_attn_scalar`` follows the head width unless the architecture sets it, as in
    the released models.
    """
    from transformers import Gemma3TextConfig

    a = arch or GemmaArch()
    hd = a.resolved_head_dim
    return Gemma3TextConfig(
        vocab_size=a.vocab_size, hidden_size=a.hidden_size,
        intermediate_size=a.intermediate_size, num_hidden_layers=a.num_hidden_layers,
        num_attention_heads=a.num_attention_heads, num_key_value_heads=a.num_key_value_heads,
        head_dim=hd, query_pre_attn_scalar=a.query_pre_attn_scalar or hd,
        sliding_window=a.sliding_window,
        max_position_embeddings=max_position_embeddings or a.max_position_embeddings,
    )


def count_parameters(model: Any) -> int:
    """Number of parameters (tied embeddings counted once)."""
    return int(sum(p.numel() for p in model.parameters()))


def _torch_dtype(name: str) -> Any:
    import torch

    if name not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {name!r}")
    return getattr(torch, name)


def build_causal_lm(arch: GemmaArch | None = None, model_path: str | None = None,
                    device: str = "cpu", dtype: str = "float32",
                    attn_implementation: str | None = None, seed: int = 0) -> Any:
    """A causal LM in eval mode on ``device``.

    Random weights are initialised on the device itself (a 4B model on a GPU
    takes seconds, not the minutes a CPU initialisation and copy would);
    ``device="meta"`` builds shapes only (for counting, no memory).

    Args:
        arch: Architecture for a random-weight Gemma-3 model (ignored with ``model_path``).
        model_path: A local directory holding a transformers checkpoint;
            loaded with ``local_files_only=True`` (never downloads).
        device: ``cpu``, ``cuda[:N]`` (resolved) or ``meta``.
        dtype: ``float32``, ``bfloat16`` or ``float16``.
        attn_implementation: ``eager``, ``sdpa`` or ``None`` (transformers' default).
        seed: Seed of the random weights.

    Raises:
        ValueError: for an unknown dtype or a ``model_path`` that is not a directory.
    """
    import torch
    from transformers import AutoModelForCausalLM

    td = _torch_dtype(dtype)
    kw: dict[str, Any] = {}
    if attn_implementation is not None:
        if attn_implementation not in ("eager", "sdpa"):
            raise ValueError(f"attn_implementation must be 'eager' or 'sdpa', got "
                             f"{attn_implementation!r}")
        kw["attn_implementation"] = attn_implementation
    if model_path is not None:
        if not os.path.isdir(model_path):
            raise ValueError(f"model_path must be a local directory holding a checkpoint, got "
                             f"{model_path!r} (nothing is downloaded)")
        model = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True,
                                                     dtype=td, **kw)
        model = place_model(model, device)
    else:
        torch.manual_seed(seed)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(gemma3_config(arch), dtype=td, **kw)
        model = place_model(model, device)  # already there: moves only what init left elsewhere
    return model.eval()


def arch_from_config(config: Any) -> GemmaArch:
    """The :class:`GemmaArch` fields of a loaded model's (text) config, for memory prediction."""
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(getattr(cfg, "num_attention_heads", 1) or 1)
    hidden = int(cfg.hidden_size)
    return GemmaArch(
        vocab_size=int(cfg.vocab_size), hidden_size=hidden,
        intermediate_size=int(getattr(cfg, "intermediate_size", 4 * hidden) or 4 * hidden),
        num_hidden_layers=int(cfg.num_hidden_layers), num_attention_heads=heads,
        num_key_value_heads=int(getattr(cfg, "num_key_value_heads", heads) or heads),
        head_dim=int(getattr(cfg, "head_dim", 0) or hidden // heads) if hidden % heads == 0
        else int(getattr(cfg, "head_dim", 1) or 1),
        sliding_window=int(getattr(cfg, "sliding_window", 128) or 128),
        max_position_embeddings=int(getattr(cfg, "max_position_embeddings", 4096) or 4096),
    )


def predict_memory_gb(arch: GemmaArch, batch_size: int, prompt_len: int, max_new_tokens: int,
                      dtype: str = "float32", n_params: int | None = None) -> float:
    """Predicted peak memory of one generation, in GB (an estimate: the CPU ceiling, batch ranges).

    weights + KV cache + prefill activations + logits::

        weights  = n_params * bytes                (default n_params: arch.n_params)
        kv       = 2 * layers * kv_heads * head_dim * (prompt + new) * batch * bytes
        prefill  = batch * prompt * (4 * hidden + 3 * intermediate) * bytes
        logits   = 2 * batch * vocab * 4           (last-token scores and a float32 copy)

    Raises:
        ValueError: for a non-positive batch, prompt or token count, or an unknown dtype.
    """
    for what, v in (("batch_size", batch_size), ("prompt_len", prompt_len),
                    ("max_new_tokens", max_new_tokens)):
        if int(v) < 1:
            raise ValueError(f"{what} >= 1 must hold, got {what}={v}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    b = DTYPE_BYTES[dtype]
    if n_params is None:
        n_params = arch.n_params
    weights = n_params * b
    kv = (2 * arch.num_hidden_layers * arch.num_key_value_heads * arch.resolved_head_dim
          * (prompt_len + max_new_tokens) * batch_size * b)
    prefill = batch_size * prompt_len * (4 * arch.hidden_size + 3 * arch.intermediate_size) * b
    logits = 2 * batch_size * arch.vocab_size * 4
    return float(weights + kv + prefill + logits) / 1e9


def max_batch_for_memory(arch: GemmaArch, memory_gb: float, prompt_len: int,
                         max_new_tokens: int, dtype: str = "float32",
                         n_params: int | None = None) -> int:
    """Largest batch whose :func:`predict_memory_gb` fits in ``memory_gb`` (0 when none does).

    A search that should reach a device's real memory ceiling searches up to a
    few times this (the prediction is an estimate; real OOM decides).

    Raises:
        ValueError: for ``memory_gb <= 0``.
    """
    if not memory_gb > 0:
        raise ValueError(f"memory_gb > 0 must hold, got {memory_gb}")

    def fits(b: int) -> bool:
        return predict_memory_gb(arch, b, prompt_len, max_new_tokens, dtype, n_params) <= memory_gb

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
        if hi > 1 << 40:  # pragma: no cover - only an absurd memory size gets here
            return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def meter_update_period_s(meter: Any) -> float | None:
    """How often a meter's reading changes, in seconds (``None`` when it has no such period).

    NVML: its energy counter's period as the meter measured it at start-up
    (or the sampling period); CodeCarbon every ``measure_power_secs``.
    Composite and wrapping meters report the slowest of their parts. Windows
    are sized to :data:`~ecopt.meters.base.MIN_WINDOW_PERIODS` of these.
    """
    periods: list[float] = []
    for part in getattr(meter, "parts", None) or []:
        p = meter_update_period_s(part)
        if p is not None:
            periods.append(p)
    inner = getattr(meter, "inner", None)
    if inner is not None:
        p = meter_update_period_s(inner)
        if p is not None:
            periods.append(p)
    own = getattr(meter, "update_period_s", None)
    if own is None:
        own = getattr(meter, "measure_power_secs", None)
    if isinstance(own, (int, float)) and not isinstance(own, bool) and own > 0:
        periods.append(float(own))
    return max(periods) if periods else None


@dataclass(frozen=True)
class GenerationMeasurement:
    """Energy and speed of batched greedy generation, prefill and decode measured apart.

    Joules are those of the trial's meter (its provenance is in the trial's
    phases ``prefill`` and ``decode``); ``measured`` says whether every window
    was a hardware reading.

    Attributes:
        batch_size, prompt_len, max_new_tokens: The generation measured.
        rounds: Prefill + decode rounds run (until the decode windows add up to
            ``min_window_s``).
        prefill_repeats: Prefill passes per prefill window in the last round
            (enough for 10 meter update periods, see the module docstring; a
            round whose window came out short raises it for the next).
        decode_repeats: Decodes (of ``max_new_tokens - 1`` steps) per decode
            window in the last round, likewise.
        prefill_j, prefill_s: Joules and seconds of every prefill window.
        prefill_prompts: Prompts encoded in them (``batch x`` every pass of every round).
        decode_j, decode_s: Joules and seconds of every decode window (the
            steady-state window's length is ``decode_s``).
        decode_tokens: Tokens generated in them.
        generated_tokens: Tokens of the generations measured, ``batch x max_new_tokens``
            per round (prefill's first tokens included; repeats inside a window
            measure the same generation again and are not counted).
        ttft_ms: Mean time of one prefill pass (time to first token).
        latency_per_token_ms: Mean decode step time.
        p95_latency_ms: 95th percentile of the decode steps and prefill passes.
        decode_window_min_s, prefill_window_min_s: The shortest single window.
        meter_update_period_s: The meter's update period (``None``: unknown);
            windows shorter than 10 of them are flagged.
        measured: Every window measured by hardware.
    """

    batch_size: int
    prompt_len: int
    max_new_tokens: int
    rounds: int
    prefill_repeats: int
    decode_repeats: int
    prefill_j: float
    prefill_s: float
    prefill_prompts: int
    decode_j: float
    decode_s: float
    decode_tokens: int
    generated_tokens: int
    ttft_ms: float
    latency_per_token_ms: float
    p95_latency_ms: float
    decode_window_min_s: float
    prefill_window_min_s: float
    meter_update_period_s: float | None
    measured: bool

    @property
    def prefill_j_per_prompt(self) -> float:
        return self.prefill_j / self.prefill_prompts if self.prefill_prompts else math.nan

    @property
    def decode_tokens_per_joule(self) -> float:
        return self.decode_tokens / self.decode_j if self.decode_j > 0 else math.nan

    def _per_generation(self, prefill: float, decode: float) -> float:
        """Joules (or seconds) of one generation: one prefill pass and one decode of the batch."""
        steps = self.max_new_tokens - 1
        out = prefill * self.batch_size / self.prefill_prompts if self.prefill_prompts else 0.0
        if self.decode_tokens:
            out += decode * self.batch_size * steps / self.decode_tokens
        return out

    @property
    def tokens_per_joule(self) -> float:
        """End to end: a generation's tokens over the joules of one prefill pass and one decode."""
        j = self._per_generation(self.prefill_j, self.decode_j)
        return self.batch_size * self.max_new_tokens / j if j > 0 else math.nan

    @property
    def tokens_per_s(self) -> float:
        s = self._per_generation(self.prefill_s, self.decode_s)
        return self.batch_size * self.max_new_tokens / s if s > 0 else math.nan

    @property
    def min_window_s(self) -> float | None:
        """The shortest window the meter resolves well: 10 update periods (``None``: no period)."""
        p = self.meter_update_period_s
        return None if p is None else MIN_WINDOW_PERIODS * p

    @property
    def decode_window_short(self) -> bool:
        w = self.min_window_s
        return w is not None and self.decode_tokens > 0 and self.decode_window_min_s < w

    @property
    def prefill_window_short(self) -> bool:
        w = self.min_window_s
        return w is not None and self.prefill_window_min_s < w

    def metrics(self) -> dict[str, float]:
        """The figures as trial metrics (unit-suffixed names; flags as 0/1)."""
        out = {
            "tokens_per_joule": self.tokens_per_joule,
            "joules_per_token": 1.0 / self.tokens_per_joule if self.tokens_per_joule else math.nan,
            "tokens_per_s": self.tokens_per_s,
            "decode_tokens_per_joule": self.decode_tokens_per_joule,
            "prefill_j_per_prompt": self.prefill_j_per_prompt,
            "ttft_ms": self.ttft_ms,
            "latency_per_token_ms": self.latency_per_token_ms,
            "p95_latency_ms": self.p95_latency_ms,
            "generated_tokens": float(self.generated_tokens),
            "decode_window_s": self.decode_s,
            "decode_window_min_s": self.decode_window_min_s,
            "prefill_window_min_s": self.prefill_window_min_s,
            "decode_window_short": float(self.decode_window_short),
            "prefill_window_short": float(self.prefill_window_short),
            "prefill_repeats": float(self.prefill_repeats),
            "decode_repeats": float(self.decode_repeats),
        }
        if self.meter_update_period_s is not None:
            out["meter_update_period_s"] = self.meter_update_period_s
        return out


class _Forward:
    """The model's forward pass with the argument names of the installed transformers."""

    def __init__(self, model: Any) -> None:
        params = inspect.signature(model.forward).parameters
        self.model = model
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params),
                            None)

    def __call__(self, ids: Any, cache: Any = None, use_cache: bool = True) -> tuple[Any, Any]:
        """``(next token ids (batch, 1), cache)`` by greedy argmax of the last position."""
        kw: dict[str, Any] = {"input_ids": ids, "use_cache": use_cache}
        if cache is not None:
            kw[self.cache_kw] = cache
        if self.keep_kw is not None:
            kw[self.keep_kw] = 1
        out = self.model(**kw)
        new_cache = None
        if use_cache:
            new_cache = out.get("cache") if "cache" in out else out.get("past_key_values")
        return out.logits[:, -1].argmax(-1, keepdim=True), new_cache


def _decode(fwd: _Forward, ids: Any, nxt: Any, cache: Any, steps: int, use_cache: bool,
            after_step: Any = None) -> list[Any]:
    """``steps`` greedy decode steps after a prefill gave ``nxt`` (and ``cache``); the new tokens.

    Without the cache each step runs the whole sequence (prompt ``ids`` + tokens so far).
    ``after_step`` is called after every step (a clock).
    """
    import torch

    toks = []
    seq = ids
    for _ in range(steps):
        if use_cache:
            nxt, cache = fwd(nxt, cache, use_cache=True)
        else:
            seq = torch.cat([seq, nxt], dim=1)
            nxt, _ = fwd(seq, use_cache=False)
        toks.append(nxt)
        if after_step is not None:
            after_step()
    return toks


def greedy_tokens(model: Any, input_ids: Any, max_new_tokens: int, use_cache: bool = True
                  ) -> Any:
    """The ``(batch, max_new_tokens)`` tokens greedy decoding appends to ``input_ids``.

    What :func:`measure_generation` runs (prefill, then decode steps), unmeasured;
    equal to ``model.generate(input_ids, do_sample=False, min_new_tokens=max_new_tokens,
    max_new_tokens=max_new_tokens)[:, prompt_len:]``.
    """
    import torch

    fwd = _Forward(model)
    with torch.inference_mode():
        nxt, cache = fwd(input_ids, use_cache=use_cache)
        toks = [nxt, *_decode(fwd, input_ids, nxt, cache, max_new_tokens - 1, use_cache)]
    return torch.cat(toks, dim=1)


def measure_generation(model: Any, input_ids: Any, trial: Trial, *, max_new_tokens: int,
                       use_cache: bool = True, min_window_s: float = 0.3, max_rounds: int = 50,
                       warmup_steps: int = 8, meter_period_s: float | None = None,
                       max_window_repeats: int = 10_000) -> GenerationMeasurement:
    """Measure prefill and decode of greedy generation for a batch of prompts (see module docstring).

    Opens the trial's phases ``warmup`` (not part of any figure, but part of the
    trial's energy), ``prefill`` (``samples`` = prompts) and ``decode``
    (``samples`` = tokens), then returns the figures. Works with any
    transformers causal LM whose forward pass takes ``input_ids`` and a cache.

    Args:
        model: A causal LM in eval mode, on the device of ``input_ids``.
        input_ids: ``(batch, prompt_len)`` token ids, unpadded, on the model's device.
        trial: The trial whose meter measures the phases.
        max_new_tokens: Tokens generated per sequence per round (``>= 1``); the
            first comes from the prefill, the rest from decode steps.
        use_cache: Decode with the KV cache (else recompute the whole sequence).
        min_window_s: Repeat rounds until the decode windows add up to this.
        max_rounds: Upper bound on the rounds.
        warmup_steps: Decode steps of the warm-up round (at most ``max_new_tokens
            - 1``); their median time sizes the decode windows (with 0, a decode
            window is one decode).
        meter_period_s: The meter's update period (default:
            :func:`meter_update_period_s` of ``trial.meter``); each window is
            sized to 10 of them, and at least to the meter's ``min_window_s()``
            (10 ms for a meter without update period, such as the estimate), so
            no window is flagged short; one still shorter (capped repeats) is.
        max_window_repeats: Upper bound on the prefill passes, and on the
            decodes, in one window.

    Raises:
        ValueError: for a non-2-D ``input_ids`` or non-positive counts.
    """
    import torch

    if getattr(input_ids, "ndim", 0) != 2 or input_ids.shape[0] < 1 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must be a (batch, prompt_len) tensor, got shape "
                         f"{tuple(getattr(input_ids, 'shape', ()))}")
    for what, v in (("max_new_tokens", max_new_tokens), ("max_rounds", max_rounds),
                    ("max_window_repeats", max_window_repeats)):
        if isinstance(v, bool) or int(v) < 1:
            raise ValueError(f"{what} >= 1 must hold, got {what}={v!r}")
    if not min_window_s >= 0 or warmup_steps < 0:
        raise ValueError(f"min_window_s >= 0 and warmup_steps >= 0 must hold, got "
                         f"{min_window_s}, {warmup_steps}")
    device = str(input_ids.device)
    batch, prompt_len = int(input_ids.shape[0]), int(input_ids.shape[1])
    period = meter_period_s if meter_period_s is not None else meter_update_period_s(trial.meter)
    target_s = MIN_WINDOW_PERIODS * period if period is not None else None
    try:  # the least window the trial will not flag (a meter without update period: 10 ms)
        least = float(trial.meter.min_window_s())
    except Exception:  # noqa: BLE001 - a meter that cannot say: its period alone
        least = 0.0
    if least > 0:
        target_s = max(target_s or 0.0, least)
    steps = int(max_new_tokens) - 1
    fwd = _Forward(model)
    step_s: list[float] = []
    ttft_s: list[float] = []
    decode_windows: list[float] = []
    prefill_windows: list[float] = []
    clock: list[float] = []

    def stamp() -> None:
        synchronize(device)
        clock.append(time.perf_counter())

    def repeats_for(one_s: float | None, now: int = 1) -> int:
        """Repeats of a ``one_s``-second piece of work that fill ``target_s`` (with half again to
        spare: the timing is an estimate, and a window a hair short is flagged), never fewer
        than ``now``."""
        if target_s is None or not one_s or one_s <= 0:
            return now
        return int(min(max_window_repeats, max(now, math.ceil(1.5 * target_s / one_s))))

    def timed(fn: Any) -> float:
        t = time.perf_counter()
        fn()
        synchronize(device)
        return time.perf_counter() - t

    with torch.inference_mode():
        with trial.phase("warmup"):
            nxt, cache = fwd(input_ids, use_cache=use_cache)  # cold: allocation, kernel choice
            synchronize(device)
            warm = min(warmup_steps, steps)
            clock[:] = [time.perf_counter()]
            _decode(fwd, input_ids, nxt, cache, warm, use_cache, after_step=stamp)
            # The warm steps after the first; a whole decode takes `steps` of them.
            warm_steps = [b - a for a, b in zip(clock, clock[1:])]
            one_decode_s = (float(np.median(warm_steps[1:] or warm_steps)) * steps
                            if warm_steps else None)
            del cache
            one_prefill_s: float | None = None
            if target_s is not None:
                # A warm pass (the cold one above chose kernels and allocated); when it is
                # short enough that repeats are needed, the median of three.
                one_prefill_s = timed(lambda: fwd(input_ids, use_cache=use_cache))
                if one_prefill_s < target_s:
                    one_prefill_s = float(np.median([one_prefill_s] + [
                        timed(lambda: fwd(input_ids, use_cache=use_cache)) for _ in range(2)]))
        repeats = repeats_for(one_prefill_s)
        decode_repeats = repeats_for(one_decode_s) if steps else 1
        rounds = 0
        while True:
            with trial.phase("prefill", samples=batch * repeats):
                w0 = time.perf_counter()
                for _ in range(repeats - 1):
                    fwd(input_ids, use_cache=use_cache)
                synchronize(device)
                t0 = time.perf_counter()
                nxt, cache = fwd(input_ids, use_cache=use_cache)
                synchronize(device)
                t1 = time.perf_counter()
            ttft_s.append(t1 - t0)
            prefill_windows.append(t1 - w0)
            if steps:
                with trial.phase("decode", samples=batch * steps * decode_repeats):
                    w0 = time.perf_counter()
                    for r in range(decode_repeats):
                        # Each repeat decodes from the same prompt cache; all but the last
                        # from a copy (decoding extends the cache in place).
                        use = copy.deepcopy(cache) if r < decode_repeats - 1 and use_cache \
                            else cache
                        clock[:] = [time.perf_counter()]
                        _decode(fwd, input_ids, nxt, use, steps, use_cache, after_step=stamp)
                        step_s += [b - a for a, b in zip(clock, clock[1:])]
                        del use
                    w1 = clock[-1]
                decode_windows.append(w1 - w0)
            used = (repeats, decode_repeats)
            # A window that came out short (the estimate was off) sizes the next rounds.
            repeats = repeats_for(prefill_windows[-1] / repeats, repeats)
            if steps:
                decode_repeats = repeats_for(decode_windows[-1] / decode_repeats, decode_repeats)
            del cache
            rounds += 1
            if sum(decode_windows) >= min_window_s or rounds >= max_rounds:
                break
    pre, dec = trial.phases["prefill"], trial.phases.get("decode")
    all_steps = np.asarray(step_s + ttft_s) * 1e3
    return GenerationMeasurement(
        batch_size=batch, prompt_len=prompt_len, max_new_tokens=int(max_new_tokens),
        rounds=rounds, prefill_repeats=used[0], decode_repeats=used[1],
        prefill_j=pre.energy_j, prefill_s=pre.duration_s, prefill_prompts=int(pre.samples or 0),
        decode_j=dec.energy_j if dec else 0.0, decode_s=dec.duration_s if dec else 0.0,
        decode_tokens=int(dec.samples or 0) if dec else 0,
        generated_tokens=batch * max_new_tokens * rounds,
        ttft_ms=1e3 * float(np.mean(ttft_s)),
        latency_per_token_ms=1e3 * float(np.mean(step_s)) if step_s else 1e3 * float(np.mean(ttft_s)),
        p95_latency_ms=float(np.percentile(all_steps, 95)),
        decode_window_min_s=min(decode_windows) if decode_windows else 0.0,
        prefill_window_min_s=min(prefill_windows),
        meter_update_period_s=period,
        measured=pre.measured and (dec.measured if dec else True),
    )


@dataclass
class GenerationObjective:
    """Generate with a causal LM under the meter; returns tokens/J and a latency or throughput.

    Picklable (models are rebuilt in the worker and cached per architecture, dtype
    and attention implementation).

    Args:
        arch: Built-in random-weight architecture (trial params may override its
            fields); e.g. ``GEMMA3_PRESETS["1b"]``.
        model_path: Local checkpoint directory instead of ``arch``.
        device: ``auto`` (GPU when available), ``cpu``, ``cuda`` or ``cuda:N``.
        dtype, attn_implementation, use_cache, batch_size, max_new_tokens, prompt_len:
            Defaults for params the space does not search.
        max_memory_gb: Emulated memory ceiling (see the module docstring);
            ``None`` lets the hardware decide (a real OOM on GPU).
        min_window_s: Repeat prefill + decode rounds until the decode windows
            add up to this.
        max_repeats: Upper bound on those rounds.
        returns: Metric names returned to the study (the objectives); every
            other metric is recorded with ``trial.set_metric``.
        seed: Seed of the weights and the random prompts.
        max_window_repeats: Upper bound on the prefill passes, and on the
            decodes, repeated in one window to make it 10 meter update periods long.
    """

    arch: GemmaArch = field(default_factory=GemmaArch)
    model_path: str | None = None
    device: str = "auto"
    dtype: str = "float32"
    attn_implementation: str | None = None
    use_cache: bool = True
    batch_size: int = 1
    max_new_tokens: int = 32
    prompt_len: int = 16
    max_memory_gb: float | None = None
    min_window_s: float = 0.3
    max_repeats: int = 50
    returns: tuple[str, ...] = ("tokens_per_joule", "p95_latency_ms")
    seed: int = 0
    max_window_repeats: int = 10_000

    _METRICS = ("tokens_per_joule", "tokens_per_s", "latency_per_token_ms", "p95_latency_ms",
                "peak_memory_gb", "predicted_memory_gb", "n_params", "generated_tokens",
                "joules_per_token", "decode_tokens_per_joule", "prefill_j_per_prompt",
                "ttft_ms")

    def __post_init__(self) -> None:
        if self.max_memory_gb is not None and not self.max_memory_gb > 0:
            raise ValueError(f"max_memory_gb > 0 must hold, got {self.max_memory_gb}")
        if not self.min_window_s >= 0:
            raise ValueError(f"min_window_s >= 0 must hold, got {self.min_window_s}")
        if self.max_repeats < 1:
            raise ValueError(f"max_repeats >= 1 must hold, got {self.max_repeats}")
        if self.max_window_repeats < 1:
            raise ValueError(f"max_window_repeats >= 1 must hold, got {self.max_window_repeats}")
        unknown = [r for r in self.returns if r not in self._METRICS]
        if unknown or not self.returns:
            raise ValueError(f"returns must be a non-empty subset of {list(self._METRICS)}, "
                             f"got {list(self.returns)}")
        self._models: dict[tuple[Any, ...], Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_models"] = {}
        return state

    def _p(self, trial: Trial, name: str) -> Any:
        return trial.params.get(name, getattr(self, name))

    def model_for(self, arch: GemmaArch, dtype: str, attn: str | None, device: str) -> Any:
        """The cached model for this architecture/dtype/attention/device (built on first use)."""
        key = (arch, self.model_path, dtype, attn, device)
        if key not in self._models:
            self._models.clear()  # one model at a time: memory matters more than rebuild time
            if is_cuda(device):
                import torch

                torch.cuda.empty_cache()
            self._models[key] = build_causal_lm(arch, self.model_path, device, dtype, attn,
                                                self.seed)
        return self._models[key]

    def __call__(self, trial: Trial) -> dict[str, float]:
        device = resolve_device(self.device)
        dtype = str(self._p(trial, "dtype"))
        _torch_dtype(dtype)  # validated before anything runs
        if dtype == "float16" and device == "cpu":
            raise Infeasible("float16 generation is not supported on CPU; use bfloat16")
        with trial_on_device(trial, device):
            metrics, predicted, n_params = self._run(trial, device, dtype)
        cuda = is_cuda(device)
        metrics["peak_memory_gb"] = trial.metrics["peak_device_memory_gb" if cuda
                                                  else "peak_host_rss_gb"]
        for k, v in metrics.items():
            if k not in self.returns:
                trial.set_metric(k, v)
        out_vals = {**metrics, "predicted_memory_gb": predicted, "n_params": float(n_params)}
        return {k: out_vals[k] for k in self.returns}

    def _run(self, trial: Trial, device: str, dtype: str) -> tuple[dict[str, float], float, int]:
        import torch

        batch = int(self._p(trial, "batch_size"))
        new_tokens = int(self._p(trial, "max_new_tokens"))
        prompt_len = int(self._p(trial, "prompt_len"))
        attn_p = trial.params.get("attn_implementation", self.attn_implementation)
        attn = None if attn_p is None else str(attn_p)
        arch = self.arch.with_params(trial.params)
        with trial.phase("load"):
            model = self.model_for(arch, dtype, attn, device)
        if self.model_path is not None:
            arch = arch_from_config(model.config)
        n_params = count_parameters(model)
        predicted = predict_memory_gb(arch, batch, prompt_len, new_tokens, dtype,
                                      n_params=n_params)
        trial.set_metric("predicted_memory_gb", predicted)
        trial.set_metric("n_params", n_params)
        if self.max_memory_gb is not None and predicted > self.max_memory_gb:
            raise Infeasible(
                f"emulated memory ceiling: predicted {predicted:.3f} GB > max_memory_gb="
                f"{self.max_memory_gb} GB for batch_size={batch}, max_new_tokens={new_tokens} "
                "(an estimate standing in for a VRAM limit, not a measured out-of-memory)")
        vocab = int(model.config.get_text_config().vocab_size
                    if hasattr(model.config, "get_text_config") else model.config.vocab_size)
        g = torch.Generator().manual_seed(self.seed + trial.number)
        # Token ids 3.. avoid Gemma's pad/eos/bos (0, 1, 2).
        ids = to_device(torch.randint(3, vocab, (batch, prompt_len), generator=g), device)
        m = measure_generation(model, ids, trial, max_new_tokens=new_tokens,
                               use_cache=bool(self._p(trial, "use_cache")),
                               min_window_s=self.min_window_s, max_rounds=self.max_repeats,
                               max_window_repeats=self.max_window_repeats)
        for ph in ("prefill", "decode"):  # the returned per-joule figures come from these
            if ph in trial.phases:
                trial.energy_j(ph)  # marks the trial if a window was too short for the meter
        trial.set_user_attr("rounds", m.rounds)
        trial.set_user_attr("repeats", m.rounds)
        trial.set_user_attr("model", self.model_path or f"gemma3-random:{asdict(arch)}")
        if m.decode_window_short or m.prefill_window_short:
            trial.set_user_attr(
                "short_window",
                f"a {'decode' if m.decode_window_short else 'prefill'} window "
                f"({min(m.decode_window_min_s, m.prefill_window_min_s) * 1e3:.3g} ms) is shorter "
                f"than {MIN_WINDOW_PERIODS} update periods of the meter "
                f"({m.meter_update_period_s:g} s each) even after {self.max_window_repeats} "
                "repeats: its energy may be off by more than ~10%; raise the batch or "
                "max_window_repeats")
        return m.metrics(), predicted, n_params
