"""Tokens per joule against parameter count for a family of transformers (ECOpt's scaling check).

The paper reports that transformer tokens/J falls log-linearly with parameter
count. This script builds a family of Gemma-3 architectures of growing size
from ``Gemma3TextConfig`` (random weights, no download), measures tokens/J of
generation for each at one batch size (``ecopt.workloads.generation``), fits

    log10(tokens/J) = a + b * log10(params)         (log-log: b is the elasticity)
    tokens/J        = a + b * log10(params)         (semi-log, for reference)

and reports slope, intercept and R^2 of both, with a plot. The study
(``<out>/study``) is a grid over the family index.

The family is ``--sizes`` (small HIDDENxLAYERS architectures, CPU-friendly) or
``--presets 270m,1b,4b`` (the published Gemma-3 text-model shapes, random
weights: a GPU job). ``--device auto`` uses the GPU when there is one;
``--dtype auto`` is bfloat16 there, float32 on the CPU. Tokens/J is end to end
(prefill + decode, measured apart: ``decode_tokens_per_joule`` and
``prefill_j_per_prompt`` are in every trial).

Example:
    python experiments/energy_scaling.py --out runs/energy_scaling
    python experiments/energy_scaling.py --presets 270m,1b,4b --device cuda --batch 64 \
        --out runs/energy_scaling_gpu
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402

__all__ = ["FAMILY", "family_arch", "FamilyObjective", "loglinear_fit", "plot", "parse_sizes",
           "parse_presets", "QUICK", "main"]

#: What --quick sets (options given explicitly still win).
QUICK: dict[str, Any] = {"sizes": "16x1,32x1,64x1", "vocab": 64, "batch": 2, "max_new_tokens": 3,
                         "prompt_len": 2, "min_window_s": 0.0}

#: (hidden size, decoder layers) of the default family, smallest first.
FAMILY: tuple[tuple[int, int], ...] = ((32, 1), (64, 2), (96, 2), (128, 3), (192, 4),
                                       (256, 4), (320, 6), (384, 8))


def family_arch(hidden: int, layers: int, vocab: int = 1024) -> Any:
    """A Gemma-3 architecture of the family: MLP 4x wide, 32-wide heads, 1 KV head per 4 heads."""
    from ecopt.workloads.generation import GemmaArch

    heads = max(1, hidden // 32)
    kv = max(1, heads // 4)
    while heads % kv:
        kv -= 1
    return GemmaArch(vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden,
                     num_hidden_layers=layers, num_attention_heads=heads,
                     num_key_value_heads=kv)


@dataclass
class FamilyObjective:
    """Tokens/J of family member ``trial["size"]`` (one generation objective per member).

    Args:
        sizes: ``(hidden, layers)`` per index (members built by :func:`family_arch`).
        vocab: Vocabulary size of every member.
        device: ``cpu``/``cuda``/``cuda:N``/``auto``.
        batch_size, max_new_tokens, prompt_len, min_window_s: Generation settings.
        seed: Weights and prompts seed.
        archs: The members themselves (e.g. Gemma-3 presets), instead of ``sizes``.
        dtype: Weights' dtype (``float32``, ``bfloat16``, ``float16``).
    """

    sizes: tuple[tuple[int, int], ...] = FAMILY
    vocab: int = 1024
    device: str = "auto"
    batch_size: int = 8
    max_new_tokens: int = 32
    prompt_len: int = 16
    min_window_s: float = 0.3
    seed: int = 0
    _objs: dict[int, Any] = field(default_factory=dict, repr=False)
    archs: tuple[Any, ...] | None = None
    dtype: str = "float32"

    def members(self) -> tuple[Any, ...]:
        """The architectures, smallest first as given."""
        if self.archs is not None:
            return tuple(self.archs)
        return tuple(family_arch(h, n, self.vocab) for h, n in self.sizes)

    def objective(self, index: int) -> Any:
        """The generation objective of member ``index`` (cached; one model held at a time)."""
        from ecopt.workloads.generation import GenerationObjective

        if index not in self._objs:
            self._objs.clear()
            self._objs[index] = GenerationObjective(
                arch=self.members()[index], device=self.device, dtype=self.dtype,
                batch_size=self.batch_size, max_new_tokens=self.max_new_tokens,
                prompt_len=self.prompt_len, min_window_s=self.min_window_s,
                returns=("tokens_per_joule",), seed=self.seed)
        return self._objs[index]

    def __call__(self, trial: Any) -> dict[str, float]:
        i = int(trial["size"])
        a = self.members()[i]
        trial.set_metric("hidden_size", a.hidden_size)
        trial.set_metric("num_hidden_layers", a.num_hidden_layers)
        return self.objective(i)(trial)


def loglinear_fit(params: Sequence[float], tokens_per_joule: Sequence[float]
                  ) -> dict[str, float]:
    """Least-squares fits of tokens/J on log10(params).

    Returns:
        ``slope``, ``intercept``, ``r2`` of log10(tokens/J) on log10(params),
        and ``semilog_slope``, ``semilog_intercept``, ``semilog_r2`` of tokens/J
        on log10(params).

    Raises:
        ValueError: for fewer than 3 points, mismatched lengths or non-positive values.
    """
    import numpy as np

    x = np.asarray(params, dtype=float)
    y = np.asarray(tokens_per_joule, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 3:
        raise ValueError(f"need >= 3 matching points, got {x.shape} and {y.shape}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("params and tokens_per_joule must be > 0 for a log fit")
    lx = np.log10(x)

    def fit(yy: Any) -> tuple[float, float, float]:
        b, a = np.polyfit(lx, yy, 1)
        resid = yy - (a + b * lx)
        ss_tot = float(((yy - yy.mean()) ** 2).sum())
        r2 = 1.0 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else math.nan
        return float(b), float(a), r2

    b, a, r2 = fit(np.log10(y))
    sb, sa, sr2 = fit(y)
    return {"slope": b, "intercept": a, "r2": r2, "semilog_slope": sb,
            "semilog_intercept": sa, "semilog_r2": sr2}


def plot(params: Sequence[float], tpj: Sequence[float], fit: dict[str, float],
         path: str | Path, estimated: bool) -> Path:
    """tokens/J against params on log-log axes with the fitted line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(params, tpj, label="measured configs" if not estimated else "configs (ESTIMATED J)")
    xs = np.logspace(math.log10(min(params)), math.log10(max(params)), 50)
    ax.plot(xs, 10 ** (fit["intercept"] + fit["slope"] * np.log10(xs)), "--",
            label=f"log-log fit: slope {fit['slope']:.2f}, R² {fit['r2']:.3f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("parameters")
    ax.set_ylabel("tokens per joule" + (" (ESTIMATED)" if estimated else ""))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _parser() -> Any:
    p = C.base_parser(__doc__.split("\n\n")[0], "runs/energy_scaling")
    p.add_argument("--sizes", default=",".join(f"{h}x{n}" for h, n in FAMILY),
                   help="family as HIDDENxLAYERS,... (smallest first)")
    p.add_argument("--vocab", type=int, default=1024, help="vocabulary size of every member")
    C.add_device_arg(p)
    p.add_argument("--batch", type=int, default=8, help="generation batch size")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens per sequence")
    p.add_argument("--prompt-len", type=int, default=16, help="prompt tokens per sequence")
    p.add_argument("--min-window-s", type=float, default=0.3,
                   help="repeat generation until each measured window lasts this long")
    p.add_argument("--presets", default=None,
                   help="a family of published Gemma-3 text-model shapes instead of --sizes, "
                        "e.g. 270m,1b,4b (random weights; a GPU job)")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                   help="weights' dtype: auto is bfloat16 on a GPU, float32 on the CPU")
    p.add_argument("--no-plot", action="store_true", help="skip the matplotlib figure")
    C.add_quick_arg(p, "three tiny models, 3 new tokens")
    C.add_budget_arg(p)
    return p


def parse_presets(text: str) -> tuple[str, ...]:
    """``"270m,1b,4b"`` -> ``("270m", "1b", "4b")`` (names of ``GEMMA3_PRESETS``).

    Raises:
        ValueError: for an unknown or repeated name, or an empty list.
    """
    from ecopt.workloads.generation import GEMMA3_PRESETS

    names = tuple(t.strip().lower() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in GEMMA3_PRESETS]
    if bad or not names or len(set(names)) != len(names):
        raise ValueError(f"presets must be distinct names from {list(GEMMA3_PRESETS)}, got "
                         f"{text!r}")
    return names


def parse_sizes(text: str) -> tuple[tuple[int, int], ...]:
    """``"64x2,128x4"`` -> ``((64, 2), (128, 4))``.

    Raises:
        ValueError: for a malformed entry or a hidden size not a multiple of 32 below 32.
    """
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            h, n = (int(v) for v in part.lower().split("x"))
        except ValueError:
            raise ValueError(f"sizes must be HIDDENxLAYERS entries, got {part!r}") from None
        if h < 1 or n < 1 or (h > 32 and h % 32):
            raise ValueError(f"hidden must be <= 32 or a multiple of 32 and layers >= 1, got {part!r}")
        out.append((h, n))
    if len(out) < 3:
        raise ValueError(f"a fit needs at least 3 sizes, got {text!r}")
    return tuple(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiment; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    C.apply_quick(args, parser, QUICK)
    try:
        sizes = parse_sizes(args.sizes)
        presets = parse_presets(args.presets) if args.presets else None
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    if presets is not None and len(presets) < 3:
        raise SystemExit(f"a fit needs at least 3 presets, got {args.presets!r}")
    device = C.resolve_device_arg(args)  # a missing GPU stops the run here, before anything runs
    C.setup(args)
    import ecopt
    from ecopt.workloads.device import is_cuda
    from ecopt.workloads.generation import GEMMA3_PRESETS

    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if is_cuda(device) else "float32")
    archs = tuple(GEMMA3_PRESETS[n] for n in presets) if presets else None
    objective = FamilyObjective(sizes, args.vocab, device, args.batch, args.max_new_tokens,
                                args.prompt_len, args.min_window_s, seed=args.seed, archs=archs,
                                dtype=dtype)
    n_members = len(objective.members())
    family = (f"Gemma-3 presets {','.join(presets)}" if presets else
              f"Gemma-3 configs {args.sizes}")
    out = Path(args.out)
    C.say(f"energy_scaling: {n_members} {family}, batch {args.batch}, {device} ({dtype})")
    study = ecopt.Study(ecopt.SearchSpace({"size": ecopt.Int(0, n_members - 1)}),
                        [ecopt.Objective("tokens_per_joule", "max")],
                        storage=C.study_dir(out / "study", args.overwrite),
                        sampler=ecopt.samplers.GridSampler(
                            {"size": list(range(n_members))}),
                        meter=args.meter, seed=args.seed, name="energy_scaling")
    try:
        C.run_trials(study, objective, n_members - len(study.records), "grid",
                     ("n_params", "tokens_per_joule", "tokens_per_s"))
    finally:
        study.close()
    rows: list[dict[str, Any]] = sorted([{**r.params, **r.metrics, **r.values} for r in study.records
                   if r.state.value == "complete"], key=lambda r: r["n_params"])
    prov = C.provenance(study)
    measured = prov[1]
    if len(rows) < 3:
        raise SystemExit(f"only {len(rows)} complete trials; the fit needs 3")
    P = [r["n_params"] for r in rows]
    T = [r["tokens_per_joule"] for r in rows]
    fit = loglinear_fit(P, T)
    fig = None if args.no_plot else plot(P, T, fit, out / "energy_scaling.png", not measured)
    what = (f"Gemma-3 text models at their published shapes ({', '.join(presets)})" if presets
            else f"Gemma-3 configs (vocab {args.vocab}, MLP 4x hidden, 32-wide heads)")
    body = [f"{len(rows)} random-weight {what}, on {device} ({dtype}), generation batch "
            f"{args.batch}, prompt {args.prompt_len} + {args.max_new_tokens} new tokens. "
            "tokens/J is end to end; decode tokens/J and prefill J per prompt are measured in "
            "their own windows.", "",
            "## Fit", "",
            C.md_table(["fit", "slope", "intercept", "R^2"],
                       [["log10(tokens/J) vs log10(params)", fit["slope"], fit["intercept"],
                         fit["r2"]],
                        ["tokens/J vs log10(params)", fit["semilog_slope"],
                         fit["semilog_intercept"], fit["semilog_r2"]]], "fit"), "",
            f"A 10x larger model gives {10 ** fit['slope']:.3g}x the tokens/J "
            f"(log-log slope {fit['slope']:.3f}).", "",
            "## Configs", "",
            C.md_table(["hidden", "layers", "params", "tokens/J", "decode tokens/J",
                        "prefill J/prompt", "tokens/s", "p95 ms/token"],
                       [[int(r["hidden_size"]), int(r["num_hidden_layers"]), int(r["n_params"]),
                         r["tokens_per_joule"], r.get("decode_tokens_per_joule"),
                         r.get("prefill_j_per_prompt"), r["tokens_per_s"], r["p95_latency_ms"]]
                        for r in rows], "configs"), ""]
    if fig is not None:
        body += [f"Plot: `{fig}`", ""]
    facts = {"fit": fit, "configs": rows, "study": str(study.path), "device": device,
             "dtype": dtype, "presets": list(presets) if presets else None,
             "plot": str(fig) if fig else None}
    C.write_summary(out, "energy_scaling: tokens/J vs parameter count",
                    C.command_line(argv, "energy_scaling.py"), prov, "\n".join(body), facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
