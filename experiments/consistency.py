"""Does the tokens/J ranking of models hold across devices? (ECOpt's consistency check)

The paper measured the same transformer models on several machines and found
that tokens/J varies far more across models than across hardware. This script
runs the same family of random-weight Gemma-3 models (as in
``energy_scaling.py``) on every device given (default: CPU, and CUDA when it is
available), one study per device (``<out>/<device>``), and reports:

* the standard deviation of tokens/J across models (per device, then averaged)
  versus across devices (per model, then averaged), in tokens/J and in
  log10(tokens/J) (scale-free: devices differ in absolute speed);
* the Spearman rank correlation of every pair of devices (does the ranking hold?).

``--devices`` also accepts CPU thread settings such as ``cpu:1t,cpu:2t`` (the
same CPU with 1 and 2 torch threads): execution settings, not different
hardware, labelled as such in the summary. On a machine with a single device
and no thread settings the across-device spread is undefined and the summary
says so. ``--presets 270m,1b,4b`` uses the published Gemma-3 text-model shapes
(random weights) instead of ``--sizes``; ``--dtype`` is the same on every device
(float32 by default) so only the hardware differs.

Example:
    python experiments/consistency.py --devices cpu:1t,cpu:2t --out runs/consistency
    python experiments/consistency.py --devices cpu,cuda --presets 270m,1b,4b --out runs/co_gpu
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402
from energy_scaling import FamilyObjective, parse_presets, parse_sizes  # noqa: E402

__all__ = ["parse_devices", "spread", "QUICK", "main"]

#: What --quick sets (options given explicitly still win).
QUICK: dict[str, Any] = {"sizes": "16x1,32x1,64x1", "vocab": 64, "batch": 2, "max_new_tokens": 3,
                         "min_window_s": 0.0}

DEFAULT_SIZES = "32x1,64x2,128x3,256x4,384x6"


def parse_devices(text: str, cuda_available: bool) -> list[tuple[str, str, int | None]]:
    """``"auto"`` or ``"cpu,cuda,cpu:2t"`` -> ``[(label, torch device, threads or None)]``.

    ``auto`` is ``cpu`` plus ``cuda`` when available. ``cpu:Nt`` is the CPU with
    N torch threads.

    Raises:
        ValueError: for an unknown entry, or ``cuda`` asked for without a GPU.
    """
    items = ["cpu", "cuda"] if text == "auto" and cuda_available else \
        ["cpu"] if text == "auto" else [t.strip() for t in text.split(",") if t.strip()]
    out: list[tuple[str, str, int | None]] = []
    for it in items:
        if it == "cpu":
            out.append(("cpu", "cpu", None))
        elif it.startswith("cpu:") and it.endswith("t") and it[4:-1].isdigit() and int(it[4:-1]) >= 1:
            out.append((it, "cpu", int(it[4:-1])))
        elif it == "cuda" or (it.startswith("cuda:") and it[5:].isdigit()):
            if not cuda_available:
                raise ValueError(f"device {it!r} asked for but torch sees no CUDA GPU")
            out.append((it, it, None))
        else:
            raise ValueError(f"devices must be cpu, cpu:<N>t, cuda or cuda:<N>, got {it!r}")
    labels = [o[0] for o in out]
    if len(set(labels)) != len(labels) or not out:
        raise ValueError(f"devices must be distinct and non-empty, got {text!r}")
    return out


def spread(table: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Standard deviations across models and across devices of a model x device table.

    Args:
        table: device -> model -> tokens/J (models missing on a device are skipped).

    Returns:
        ``std_across_models`` / ``std_across_devices`` (mean of per-device /
        per-model sample standard deviations, tokens/J), the same on log10
        values (``*_log10``), ``cv_across_models`` / ``cv_across_devices``
        (std / mean), ``ratio_log10`` (models over devices; ``nan`` when there
        is one device), and ``spearman`` for every device pair.
    """
    import numpy as np
    from scipy import stats

    devices = list(table)
    models = sorted({m for d in devices for m in table[d]})
    common = [m for m in models if all(m in table[d] for d in devices)]
    res: dict[str, Any] = {"devices": devices, "models": common}

    def sd(v: Sequence[float]) -> float:
        return float(np.std(v, ddof=1)) if len(v) >= 2 else math.nan

    def mean(v: Sequence[float]) -> float:
        v = [x for x in v if not math.isnan(x)]
        return float(np.mean(v)) if v else math.nan

    for tag, f in (("", lambda x: x), ("_log10", math.log10)):
        res[f"std_across_models{tag}"] = mean([sd([f(table[d][m]) for m in common])
                                               for d in devices])
        res[f"std_across_devices{tag}"] = mean([sd([f(table[d][m]) for d in devices])
                                                for m in common])
    res["cv_across_models"] = mean([sd([table[d][m] for m in common])
                                    / float(np.mean([table[d][m] for m in common]))
                                    for d in devices])
    res["cv_across_devices"] = mean([sd([table[d][m] for d in devices])
                                     / float(np.mean([table[d][m] for d in devices]))
                                     for m in common])
    a, b = res["std_across_models_log10"], res["std_across_devices_log10"]
    res["ratio_log10"] = a / b if b and not math.isnan(b) else math.nan
    res["spearman"] = {}
    for i, d1 in enumerate(devices):
        for d2 in devices[i + 1:]:
            if len(common) >= 3:
                res["spearman"][f"{d1} vs {d2}"] = float(stats.spearmanr(
                    [table[d1][m] for m in common], [table[d2][m] for m in common]).statistic)
    return res


def _parser() -> Any:
    p = C.base_parser(__doc__.split("\n\n")[0], "runs/consistency")
    p.add_argument("--devices", "--device", dest="devices", default="auto",
                   help="auto (cpu + cuda when present) or a list: cpu, cpu:<N>t, cuda, cuda:<N>")
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="models as HIDDENxLAYERS,...")
    p.add_argument("--presets", default=None,
                   help="published Gemma-3 text-model shapes instead of --sizes, e.g. "
                        "270m,1b,4b (random weights)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="weights' dtype on every device")
    p.add_argument("--vocab", type=int, default=1024, help="vocabulary size of every model")
    p.add_argument("--batch", type=int, default=8, help="generation batch size")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens per sequence")
    p.add_argument("--min-window-s", type=float, default=0.3,
                   help="repeat generation until each measured window lasts this long")
    C.add_quick_arg(p, "three tiny models, 3 new tokens")
    C.add_budget_arg(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiment; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    C.apply_quick(args, parser, QUICK)
    C.setup(args)
    import torch

    import ecopt
    from ecopt.errors import DeviceUnavailableError
    from ecopt.workloads.device import resolve_device
    from ecopt.workloads.generation import GEMMA3_PRESETS

    try:
        sizes = parse_sizes(args.sizes)
        presets = parse_presets(args.presets) if args.presets else None
        devices = parse_devices(args.devices, torch.cuda.is_available())
        for _, dev, _ in devices:  # every device checked before anything runs
            resolve_device(dev)
    except (ValueError, DeviceUnavailableError) as exc:
        raise SystemExit(str(exc)) from None
    if presets is not None and len(presets) < 3:
        raise SystemExit(f"a ranking needs at least 3 presets, got {args.presets!r}")
    archs = tuple(GEMMA3_PRESETS[n] for n in presets) if presets else None
    out = Path(args.out)
    labels = list(presets) if presets else [f"{h}x{n}" for h, n in sizes]
    C.say(f"consistency: {len(sizes)} models x devices {[d[0] for d in devices]}")
    table: dict[str, dict[str, float]] = {}
    params: dict[str, float] = {}
    prov: Any = ""
    for label, dev, threads in devices:
        torch.set_num_threads(threads or args.threads)
        objective = FamilyObjective(sizes, args.vocab, dev, args.batch, args.max_new_tokens,
                                    min_window_s=args.min_window_s, seed=args.seed, archs=archs,
                                    dtype=args.dtype)
        n = len(labels)
        study = ecopt.Study(ecopt.SearchSpace({"size": ecopt.Int(0, n - 1)}),
                            [ecopt.Objective("tokens_per_joule", "max")],
                            storage=C.study_dir(out / label.replace(":", "_"), args.overwrite),
                            sampler=ecopt.samplers.GridSampler({"size": list(range(n))}),
                            meter=args.meter, seed=args.seed, name=f"consistency-{label}")
        try:
            C.run_trials(study, objective, n - len(study.records), label,
                         ("n_params", "tokens_per_joule"))
        finally:
            study.close()
        table[label] = {labels[int(r.params["size"])]: r.values["tokens_per_joule"]
                        for r in study.records if r.state.value == "complete"}
        for r in study.records:
            if "n_params" in r.metrics:
                params[labels[int(r.params["size"])]] = r.metrics["n_params"]
        prov = prov or C.provenance(study)
    torch.set_num_threads(args.threads)
    s = spread(table)
    kinds = {d[0]: ("CPU, " + (f"{d[2]} torch threads" if d[2] else f"{args.threads} thread(s)")
                    if d[1] == "cpu" else f"GPU {d[1]}") for d in devices}
    only_cpu = all(d[1] == "cpu" for d in devices)
    body = [f"{len(labels)} random-weight Gemma-3 models ({','.join(labels)}"
            + (", the published shapes" if presets else "") + f"; {args.dtype}), batch {args.batch}, "
            f"{args.max_new_tokens} new tokens; devices: "
            + "; ".join(f"`{k}` = {v}" for k, v in kinds.items()) + ".", ""]
    if only_cpu and len(devices) > 1:
        body += ["All 'devices' here are thread settings of the SAME CPU, not different "
                 "hardware: the across-device spread measures how execution settings move "
                 "tokens/J, not how hardware does.", ""]
    if len(devices) == 1:
        body += ["Only one device was run, so the spread across devices is undefined (nan); "
                 "run with a GPU present, or `--devices cpu:1t,cpu:2t`.", ""]
    body += ["## Spread", "",
             C.md_table(["", "across models", "across devices", "ratio"],
                        [["std of tokens/J", s["std_across_models"], s["std_across_devices"],
                          s["std_across_models"] / s["std_across_devices"]
                          if s["std_across_devices"] else math.nan],
                         ["std of log10(tokens/J)", s["std_across_models_log10"],
                          s["std_across_devices_log10"], s["ratio_log10"]],
                         ["coefficient of variation", s["cv_across_models"],
                          s["cv_across_devices"],
                          s["cv_across_models"] / s["cv_across_devices"]
                          if s["cv_across_devices"] else math.nan]], "spread"), ""]
    if s["spearman"]:
        body += ["Spearman rank correlation of tokens/J between devices: "
                 + ", ".join(f"{k}: {v:.3f}" for k, v in s["spearman"].items()) + ".", ""]
    body += ["## tokens/J per model and device", "",
             C.md_table(["model", "params", *table],
                        [[m, int(params.get(m, 0)), *[table[d].get(m) for d in table]]
                         for m in labels], "tokens_per_joule"), ""]
    facts = {"table": table, "params": params, "spread": s, "devices": kinds,
             "presets": list(presets) if presets else None, "dtype": args.dtype}
    C.write_summary(out, "consistency: tokens/J of the same models across devices",
                    C.command_line(argv, "consistency.py"), prov, "\n".join(body), facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
