"""Are parameter count and FLOPs good proxies for inference energy? (ECOpt's metric-validity check)

The paper found that parameter count and FLOPs are poor proxies for energy.
This script builds CNNs whose width (``channels``), ``depth`` and ``stride``
vary on a grid, so that parameter count and FLOPs move independently (stride
changes FLOPs at constant parameters; width changes both), measures the energy
of inference per image under the meter (untrained weights: the energy of a
forward pass does not depend on their values), and reports the Spearman and
Pearson correlations of energy per inference with parameters and with FLOPs
(FLOPs counted by ``torch.utils.flop_counter.FlopCounterMode``), plus a plot.

The study (``<out>/study``) is a grid study with one objective,
``joules_per_inference`` (min); ``n_params`` and ``flops`` are trial metrics.
``--device auto`` runs the models on the GPU when there is one (model and
images on it; a CUDA out-of-memory makes a trial infeasible).

Example:
    python experiments/metric_validity.py --out runs/metric_validity
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402

__all__ = ["InferenceEnergyObjective", "correlations", "plot", "QUICK", "main"]

#: What --quick sets (options given explicitly still win).
QUICK: dict[str, Any] = {"channels": "4,8", "depths": "1", "strides": "1,2", "image_size": 16,
                         "batch": 4, "min_window_s": 0.0}


@dataclass
class InferenceEnergyObjective:
    """Energy per inference of an untrained CNN on random images.

    Args:
        in_channels, image_size: Input images (CIFAR-10's shape by default).
        batch_size: Inference batch.
        min_window_s: Repeat batches until the measured window lasts this long.
        kernel_size, pooling: Architecture settings not searched.
        seed: Weight and input seed.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    """

    in_channels: int = 3
    image_size: int = 32
    batch_size: int = 64
    min_window_s: float = 0.3
    kernel_size: int = 3
    pooling: str = "none"
    seed: int = 0
    device: str = "auto"

    def __call__(self, trial: Any) -> dict[str, float]:
        from ecopt.workloads.device import resolve_device, trial_on_device

        device = resolve_device(self.device)
        with trial_on_device(trial, device):
            return self._run(trial, device)

    def _run(self, trial: Any, device: str) -> dict[str, float]:
        import torch

        from ecopt.workloads.cnn import build_cnn, count_flops, count_parameters
        from ecopt.workloads.device import place_model, to_device

        def build() -> Any:
            return build_cnn(self.in_channels, 10, self.image_size, int(trial["channels"]),
                             int(trial["depth"]),
                             int(trial.params.get("kernel_size", self.kernel_size)),
                             int(trial["stride"]), str(trial.params.get("pooling", self.pooling)))

        with torch.device("meta"):  # FLOPs from a shape-only copy: no compute
            trial.set_metric("flops", count_flops(build(), (1, self.in_channels,
                                                            self.image_size, self.image_size)))
        torch.manual_seed(self.seed)
        model = place_model(build(), device).eval()
        trial.set_metric("n_params", count_parameters(model))
        # One batch, copied once: the measured energy is the model's, not the copy's.
        x = to_device(torch.randn(self.batch_size, self.in_channels, self.image_size,
                                  self.image_size, generator=torch.Generator().manual_seed(self.seed)),
                      device)
        with torch.inference_mode():
            with trial.phase("warmup"):
                model(x)
            t0 = time.perf_counter()
            while True:
                with trial.phase("inference", samples=self.batch_size):
                    model(x)
                if time.perf_counter() - t0 >= self.min_window_s:
                    break
        ph = trial.measurement("inference")
        n = trial.samples_per_joule("inference")  # images per joule
        trial.set_metric("latency_ms_per_image", 1e3 * ph.duration_s / (n * ph.energy_j))
        return {"joules_per_inference": 1.0 / n}


def correlations(energy: Sequence[float], proxies: dict[str, Sequence[float]]
                 ) -> dict[str, dict[str, float]]:
    """Spearman and Pearson correlation (and p-values) of energy with each proxy.

    Pearson is computed on log10 values too, since params and FLOPs span decades.

    Raises:
        ValueError: for fewer than 3 points or mismatched lengths.
    """
    from scipy import stats

    e = list(map(float, energy))
    if len(e) < 3:
        raise ValueError(f"correlations need at least 3 points, got {len(e)}")
    out: dict[str, dict[str, float]] = {}
    for name, xs in proxies.items():
        x = list(map(float, xs))
        if len(x) != len(e):
            raise ValueError(f"proxy {name!r} has {len(x)} values for {len(e)} energies")
        sp = stats.spearmanr(x, e)
        pe = stats.pearsonr(x, e)
        pl = stats.pearsonr([math.log10(v) for v in x], [math.log10(v) for v in e])
        out[name] = {"spearman": float(sp.statistic), "spearman_p": float(sp.pvalue),
                     "pearson": float(pe.statistic), "pearson_p": float(pe.pvalue),
                     "pearson_log": float(pl.statistic)}
    return out


def plot(rows: Sequence[dict[str, Any]], path: str | Path, estimated: bool) -> Path:
    """Energy per inference against params and against FLOPs (log-log), coloured by stride."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key, label in ((axes[0], "n_params", "parameters"), (axes[1], "flops", "FLOPs")):
        for stride, marker in ((1, "o"), (2, "s"), (3, "^")):
            pts = [r for r in rows if r["stride"] == stride]
            if pts:
                ax.scatter([r[key] for r in pts], [r["joules_per_inference"] for r in pts],
                           marker=marker, label=f"stride {stride}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("J per inference" + (" (ESTIMATED)" if estimated else " (measured)"))
    axes[0].legend()
    fig.suptitle("Energy per inference vs proxy metrics")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _parser() -> Any:
    p = C.base_parser(__doc__.split("\n\n")[0], "runs/metric_validity")
    p.add_argument("--channels", default="8,16,32,64", help="widths (comma-separated)")
    p.add_argument("--depths", default="1,2,3", help="depths (comma-separated)")
    p.add_argument("--strides", default="1,2", help="strides (comma-separated)")
    p.add_argument("--image-size", type=int, default=32, help="input height = width")
    p.add_argument("--in-channels", type=int, default=3, help="input channels")
    p.add_argument("--batch", type=int, default=64, help="inference batch")
    p.add_argument("--min-window-s", type=float, default=0.3,
                   help="repeat inference until each measured window lasts this long")
    p.add_argument("--no-plot", action="store_true", help="skip the matplotlib figure")
    C.add_device_arg(p)
    C.add_quick_arg(p, "4 small CNNs on 16x16 images")
    C.add_budget_arg(p)
    return p


def _ints(text: str, what: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"--{what} must be comma-separated integers, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise SystemExit(f"--{what} must be integers >= 1, got {text!r}")
    return sorted(set(vals))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiment; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    C.apply_quick(args, parser, QUICK)
    channels, depths = _ints(args.channels, "channels"), _ints(args.depths, "depths")
    strides = _ints(args.strides, "strides")
    device = C.resolve_device_arg(args)  # a missing GPU stops the run here, before anything runs
    C.setup(args)
    import ecopt

    space = ecopt.SearchSpace({
        "channels": ecopt.Int(1, max(channels) + 1),
        "depth": ecopt.Int(1, max(depths) + 1),
        "stride": ecopt.Int(1, max(strides) + 1),
    })
    n = len(channels) * len(depths) * len(strides)
    objective = InferenceEnergyObjective(args.in_channels, args.image_size, args.batch,
                                         args.min_window_s, seed=args.seed, device=device)
    out = Path(args.out)
    C.say(f"metric_validity: {n} CNNs on {args.in_channels}x{args.image_size}x{args.image_size} "
          f"random images, batch {args.batch}")
    study = ecopt.Study(space, [ecopt.Objective("joules_per_inference", "min")],
                        storage=C.study_dir(out / "study", args.overwrite),
                        sampler=ecopt.samplers.GridSampler(
                            {"channels": channels, "depth": depths, "stride": strides}),
                        meter=args.meter, seed=args.seed, name="metric_validity")
    try:
        C.run_trials(study, objective, n, "grid",
                     ("joules_per_inference", "n_params", "flops", "latency_ms_per_image"))
    finally:
        study.close()
    rows: list[dict[str, Any]] = [{**r.params, **r.metrics, **r.values} for r in study.records
            if r.state.value == "complete"]
    prov_info = C.provenance(study)
    _, measured, _ = prov_info
    if len(rows) < 3:
        raise SystemExit(f"only {len(rows)} complete trials; correlations need 3")
    corr = correlations([r["joules_per_inference"] for r in rows],
                        {"params": [r["n_params"] for r in rows],
                         "flops": [r["flops"] for r in rows]})
    fig = None
    if not args.no_plot:
        fig = plot(rows, out / "metric_validity.png", estimated=not measured)
    # Pairs with equal params and different stride: how far do FLOPs and energy move?
    pairs = []
    by_arch: dict[tuple[int, int], dict[int, dict[str, Any]]] = {}
    for r in rows:
        by_arch.setdefault((r["channels"], r["depth"]), {})[r["stride"]] = r
    for (c, d), per in sorted(by_arch.items()):
        if 1 in per and 2 in per:
            a, b = per[1], per[2]
            pairs.append([c, d, a["n_params"], a["flops"] / b["flops"],
                          a["joules_per_inference"] / b["joules_per_inference"]])
    body = [f"{len(rows)} CNNs (channels {channels}, depth {depths}, stride {strides}; 3x3 convs, "
            f"no pooling, so stride is the only downsampling), untrained, on "
            f"{args.in_channels}x{args.image_size}x{args.image_size} random images in batches "
            f"of {args.batch}. FLOPs from torch's FlopCounterMode (2 per multiply-add).", "",
            "## Correlation of energy per inference with the proxies", "",
            C.md_table(["proxy", "Spearman", "p", "Pearson", "p", "Pearson (log10-log10)"],
                       [[k, v["spearman"], v["spearman_p"], v["pearson"], v["pearson_p"],
                         v["pearson_log"]] for k, v in corr.items()], "correlations"), "",
            "## Same parameters, stride 1 vs stride 2", "",
            C.md_table(["channels", "depth", "params", "FLOPs ratio s1/s2",
                        "energy ratio s1/s2"], pairs, "stride_pairs"), "",
            "## Every model", "",
            C.md_table(["channels", "depth", "stride", "params", "FLOPs", "J/inference",
                        "ms/image"],
                       [[r["channels"], r["depth"], r["stride"], int(r["n_params"]),
                         int(r["flops"]), r["joules_per_inference"], r["latency_ms_per_image"]]
                        for r in sorted(rows, key=lambda r: (r["channels"], r["depth"],
                                                             r["stride"]))], "models"), ""]
    if fig is not None:
        body += [f"Plot: `{fig}`", ""]
    facts = {"correlations": corr, "n_models": len(rows), "stride_pairs": pairs,
             "study": str(study.path), "plot": str(fig) if fig else None}
    facts["device"] = device
    C.write_summary(out, "metric_validity: parameters and FLOPs as proxies for inference energy",
                    C.command_line(argv, "metric_validity.py"), prov_info, "\n".join(body), facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
