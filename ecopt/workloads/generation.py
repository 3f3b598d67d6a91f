"""A ready objective: tokens per joule of text generation with a real transformers causal LM.

By default the model is a *small Gemma-3 architecture* built from
``transformers.Gemma3TextConfig`` with random weights (``AutoModelForCausalLM.from_config``):
nothing is downloaded, and tokens/J depends on the compute a forward pass does,
not on what the weights say. ``model_path`` loads real local weights instead
(``from_pretrained(path, local_files_only=True)``), on the GPU when there is one.

The objective reads these params from the trial (missing ones take the
defaults of :class:`GenerationObjective`): ``batch_size``, ``max_new_tokens``,
``prompt_len``, ``dtype`` (``float32``/``bfloat16``/``float16``),
``attn_implementation`` (``eager``/``sdpa``), ``use_cache`` (the KV cache on or
off) and, for the built-in
architecture, ``hidden_size``, ``num_hidden_layers``, ``intermediate_size``,
``num_attention_heads``, ``num_key_value_heads``, ``vocab_size``.

It generates exactly ``max_new_tokens`` tokens per sequence (greedy, EOS
suppressed with ``min_new_tokens``) inside a ``generate`` phase, repeating the
call until the window lasts at least ``min_window_s`` so a meter can resolve
it, and records:

* ``tokens_per_joule``: generated tokens / joules of the phase,
* ``tokens_per_s``: generated tokens / seconds of the phase,
* ``latency_per_token_ms``: mean time per decoding step (each step yields one
  token per sequence, so this is the latency a user sees per token),
* ``p95_latency_ms``: 95th percentile of the per-step times (the prefill step
  included),
* ``peak_memory_gb``: ``torch.cuda.max_memory_allocated`` on a GPU; on CPU the
  peak resident set size of the process sampled at every step (it includes the
  interpreter and libraries),
* ``predicted_memory_gb``: :func:`predict_memory_gb`'s estimate.

Out of memory: on a GPU ``torch.cuda.OutOfMemoryError`` is raised and the
study records the trial as *infeasible*. On CPU a real out-of-memory would take
the machine down with it, so ``max_memory_gb`` emulates a memory ceiling: when
:func:`predict_memory_gb` exceeds it the objective raises
:class:`ecopt.Infeasible` before generating (an emulated VRAM limit, not a
measured one; the record's error message says so).

Example:
    >>> objective = GenerationObjective(max_new_tokens=32, max_memory_gb=0.25)
    >>> space = ecopt.SearchSpace({"batch_size": ecopt.Int(1, 4096, log=True)})
    >>> study = ecopt.Study(space, [ecopt.Objective("tokens_per_joule", "max"),
    ...                             ecopt.Objective("p95_latency_ms", "min")])
    >>> study.optimize(objective, n_trials=12)
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ecopt.errors import Infeasible
from ecopt.trial import Trial

__all__ = ["GemmaArch", "GenerationObjective", "gemma3_config", "build_causal_lm",
           "predict_memory_gb", "arch_from_config", "count_parameters", "DTYPE_BYTES",
           "resolve_device"]

#: Bytes per element of the dtypes the objective understands.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

_ARCH_PARAMS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "head_dim")


@dataclass(frozen=True)
class GemmaArch:
    """A small Gemma-3 text architecture (the defaults run in milliseconds per token on CPU).

    Attributes:
        vocab_size: Tokens in the vocabulary (Gemma 3 has 262,208; small keeps CPU runs quick).
        hidden_size: Model width.
        intermediate_size: MLP width.
        num_hidden_layers: Decoder layers.
        num_attention_heads: Query heads (``hidden_size`` must divide by it).
        num_key_value_heads: Key/value heads (grouped-query attention).
        head_dim: Per-head width (default ``hidden_size // num_attention_heads``).
        sliding_window: Local attention window of the sliding layers.
    """

    vocab_size: int = 1024
    hidden_size: int = 64
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    head_dim: int | None = None
    sliding_window: int = 128

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "num_key_value_heads", "sliding_window"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {name}={v!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size must be a multiple of num_attention_heads, got "
                             f"hidden_size={self.hidden_size}, "
                             f"num_attention_heads={self.num_attention_heads}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads must be a multiple of num_key_value_heads, got "
                             f"{self.num_attention_heads} and {self.num_key_value_heads}")
        if self.head_dim is not None and self.head_dim < 1:
            raise ValueError(f"head_dim >= 1 must hold, got {self.head_dim}")

    @property
    def resolved_head_dim(self) -> int:
        return int(self.head_dim or self.hidden_size // self.num_attention_heads)

    def with_params(self, params: dict[str, Any]) -> GemmaArch:
        """A copy with the architecture keys of ``params`` applied."""
        changes = {k: int(params[k]) for k in _ARCH_PARAMS if k in params}
        if not changes:
            return self
        d = asdict(self)
        d.update(changes)
        if "hidden_size" in changes or "num_attention_heads" in changes:
            d["head_dim"] = changes.get("head_dim")  # re-derive unless given
        return GemmaArch(**d)


def gemma3_config(arch: GemmaArch | None = None, max_position_embeddings: int = 4096) -> Any:
    """A ``transformers.Gemma3TextConfig`` for ``arch`` (Gemma 3's layer pattern and norms).

    ``query_pre_attn_scalar`` follows the head width, as in the released models.
    """
    from transformers import Gemma3TextConfig

    a = arch or GemmaArch()
    hd = a.resolved_head_dim
    return Gemma3TextConfig(
        vocab_size=a.vocab_size, hidden_size=a.hidden_size,
        intermediate_size=a.intermediate_size, num_hidden_layers=a.num_hidden_layers,
        num_attention_heads=a.num_attention_heads, num_key_value_heads=a.num_key_value_heads,
        head_dim=hd, query_pre_attn_scalar=hd, sliding_window=a.sliding_window,
        max_position_embeddings=max_position_embeddings,
    )


def count_parameters(model: Any) -> int:
    """Number of parameters (tied embeddings counted once)."""
    return int(sum(p.numel() for p in model.parameters()))


def _torch_dtype(name: str) -> Any:
    import torch

    if name not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {name!r}")
    return getattr(torch, name)


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when a GPU is usable, else ``cpu``."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {device!r}")
    return device


def build_causal_lm(arch: GemmaArch | None = None, model_path: str | None = None,
                    device: str = "cpu", dtype: str = "float32",
                    attn_implementation: str | None = None, seed: int = 0) -> Any:
    """A causal LM in eval mode on ``device``.

    Args:
        arch: Architecture for a random-weight Gemma-3 model (ignored with ``model_path``).
        model_path: A local directory holding a transformers checkpoint;
            loaded with ``local_files_only=True`` (never downloads).
        device: ``cpu`` or ``cuda[:N]``.
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
    else:
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(gemma3_config(arch), dtype=td, **kw)
    model = model.to(device)  # type: ignore[arg-type]  # transformers' stub wants a dtype
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
    )


def predict_memory_gb(arch: GemmaArch, batch_size: int, prompt_len: int, max_new_tokens: int,
                      dtype: str = "float32", n_params: int | None = None) -> float:
    """Predicted peak memory of one generate call, in GB (an estimate, used for the CPU ceiling).

    weights + KV cache + prefill activations + logits::

        weights  = n_params * bytes
        kv       = 2 * layers * kv_heads * head_dim * (prompt + new) * batch * bytes
        prefill  = batch * prompt * (4 * hidden + 3 * intermediate) * bytes
        logits   = 2 * batch * vocab * 4           (float32 scores and their processed copy)

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
        hd = arch.resolved_head_dim
        per_layer = (arch.hidden_size * hd * (arch.num_attention_heads * 2
                                              + arch.num_key_value_heads * 2)
                     + 3 * arch.hidden_size * arch.intermediate_size)
        n_params = arch.vocab_size * arch.hidden_size + arch.num_hidden_layers * per_layer
    weights = n_params * b
    kv = (2 * arch.num_hidden_layers * arch.num_key_value_heads * arch.resolved_head_dim
          * (prompt_len + max_new_tokens) * batch_size * b)
    prefill = batch_size * prompt_len * (4 * arch.hidden_size + 3 * arch.intermediate_size) * b
    logits = 2 * batch_size * arch.vocab_size * 4
    return float(weights + kv + prefill + logits) / 1e9


def _rss_gb() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e9
    except OSError:  # pragma: no cover - non-Linux
        return float("nan")


class _StepClock:
    """A logits processor that timestamps every decoding step (and samples RSS on CPU)."""

    def __init__(self, sample_rss: bool) -> None:
        self.stamps: list[float] = []
        self.sample_rss = sample_rss
        self.peak_rss_gb = 0.0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.stamps.append(time.perf_counter())
        if self.sample_rss:
            self.peak_rss_gb = max(self.peak_rss_gb, _rss_gb())
        return scores


@dataclass
class GenerationObjective:
    """Generate with a causal LM under the meter; returns tokens/J and a latency or throughput.

    Picklable (models are rebuilt in the worker and cached per architecture, dtype
    and attention implementation).

    Args:
        arch: Built-in random-weight architecture (trial params may override its fields).
        model_path: Local checkpoint directory instead of ``arch``.
        device: ``auto`` (GPU when available), ``cpu`` or ``cuda[:N]``.
        dtype, attn_implementation, use_cache, batch_size, max_new_tokens, prompt_len:
            Defaults for params the space does not search.
        max_memory_gb: Emulated memory ceiling (see the module docstring);
            ``None`` lets the hardware decide (a real OOM on GPU).
        min_window_s: Repeat generation until the measured window lasts this long.
        max_repeats: Upper bound on those repeats.
        returns: Metric names returned to the study (the objectives); every
            other metric is recorded with ``trial.set_metric``.
        seed: Seed of the weights and the random prompts.
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

    _METRICS = ("tokens_per_joule", "tokens_per_s", "latency_per_token_ms", "p95_latency_ms",
                "peak_memory_gb", "predicted_memory_gb", "n_params", "generated_tokens",
                "joules_per_token")

    def __post_init__(self) -> None:
        if self.max_memory_gb is not None and not self.max_memory_gb > 0:
            raise ValueError(f"max_memory_gb > 0 must hold, got {self.max_memory_gb}")
        if not self.min_window_s >= 0:
            raise ValueError(f"min_window_s >= 0 must hold, got {self.min_window_s}")
        if self.max_repeats < 1:
            raise ValueError(f"max_repeats >= 1 must hold, got {self.max_repeats}")
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
            self._models[key] = build_causal_lm(arch, self.model_path, device, dtype, attn,
                                                self.seed)
        return self._models[key]

    def __call__(self, trial: Trial) -> dict[str, float]:
        import torch

        device = resolve_device(self.device)
        batch = int(self._p(trial, "batch_size"))
        new_tokens = int(self._p(trial, "max_new_tokens"))
        prompt_len = int(self._p(trial, "prompt_len"))
        dtype = str(self._p(trial, "dtype"))
        attn_p = trial.params.get("attn_implementation", self.attn_implementation)
        attn = None if attn_p is None else str(attn_p)
        if dtype == "float16" and device == "cpu":
            raise Infeasible("float16 generation is not supported on CPU; use bfloat16")
        arch = self.arch.with_params(trial.params)
        with trial.phase("load"):
            model = self.model_for(arch, dtype, attn, device)
        if self.model_path is not None:
            arch = arch_from_config(model.config)
        predicted = predict_memory_gb(arch, batch, prompt_len, new_tokens, dtype,
                                      n_params=count_parameters(model))
        trial.set_metric("predicted_memory_gb", predicted)
        if self.max_memory_gb is not None and predicted > self.max_memory_gb:
            raise Infeasible(
                f"emulated memory ceiling: predicted {predicted:.3f} GB > max_memory_gb="
                f"{self.max_memory_gb} GB for batch_size={batch}, max_new_tokens={new_tokens} "
                "(an estimate standing in for a VRAM limit, not a measured out-of-memory)")
        n_params = count_parameters(model)
        trial.set_metric("n_params", n_params)
        vocab = int(model.config.vocab_size)
        g = torch.Generator().manual_seed(self.seed + trial.number)
        # Token ids 3.. avoid Gemma's pad/eos/bos (0, 1, 2).
        ids = torch.randint(3, vocab, (batch, prompt_len), generator=g).to(device)
        mask = torch.ones_like(ids)
        gen_kw: dict[str, Any] = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                      do_sample=False, pad_token_id=0,
                                      use_cache=bool(self._p(trial, "use_cache")))
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats(device)
        try:
            from transformers import LogitsProcessorList

            with torch.inference_mode():
                # Warm-up (first calls allocate and pick kernels): its own phase, so it
                # counts in the search's energy but not in tokens/J.
                with trial.phase("warmup"):
                    model.generate(input_ids=ids, attention_mask=mask,
                                   **{**gen_kw, "max_new_tokens": 2, "min_new_tokens": 2})
                step_ms: list[float] = []
                clock = _StepClock(sample_rss=not device.startswith("cuda"))
                per_call = batch * new_tokens
                n_tokens = 0
                repeats = 0
                t_start = time.perf_counter()
                while True:
                    # One window per call; re-entering the phase adds to it (tokens summed).
                    with trial.phase("generate", samples=per_call):
                        clock.stamps.clear()
                        t0 = time.perf_counter()
                        out = model.generate(input_ids=ids, attention_mask=mask,
                                             logits_processor=LogitsProcessorList([clock]),
                                             **gen_kw)
                        if device.startswith("cuda"):
                            torch.cuda.synchronize(device)
                        t1 = time.perf_counter()
                    made = int(out.shape[0]) * (int(out.shape[1]) - prompt_len)
                    if made != per_call:  # pragma: no cover - min_new_tokens guarantees it
                        raise RuntimeError(f"generate made {made} tokens, expected {per_call}")
                    stamps = [t0, *clock.stamps[1:], t1]
                    step_ms += [1e3 * (b - a) for a, b in zip(stamps, stamps[1:])]
                    n_tokens += made
                    repeats += 1
                    if t1 - t_start >= self.min_window_s or repeats >= self.max_repeats:
                        break
        except torch.cuda.OutOfMemoryError:
            self._models.clear()
            torch.cuda.empty_cache()
            raise
        tpj = trial.samples_per_joule("generate")
        dur = trial.duration_s("generate")
        if device.startswith("cuda"):
            peak = torch.cuda.max_memory_allocated(device) / 1e9
        else:
            peak = clock.peak_rss_gb
        metrics = {
            "tokens_per_joule": tpj,
            "joules_per_token": 1.0 / tpj,
            "tokens_per_s": n_tokens / dur if dur > 0 else float("nan"),
            "latency_per_token_ms": float(np.mean(step_ms)),
            "p95_latency_ms": float(np.percentile(step_ms, 95)),
            "peak_memory_gb": peak,
            "generated_tokens": float(n_tokens),
        }
        for k, v in metrics.items():
            if k not in self.returns:
                trial.set_metric(k, v)
        trial.set_user_attr("device", device)
        trial.set_user_attr("repeats", repeats)
        trial.set_user_attr("model", self.model_path or f"gemma3-random:{asdict(arch)}")
        out_vals = {**metrics, "predicted_memory_gb": predicted, "n_params": float(n_params)}
        return {k: out_vals[k] for k in self.returns}
