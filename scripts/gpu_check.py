"""Check ecopt's NVML meter on a real NVIDIA GPU and print a report (markdown).

What it does, on GPU ``--gpu`` (CUDA index):

1. idle power for ``--idle-s`` seconds (energy counter and sampled power);
2. a fixed matmul workload (square fp32 matmuls for ``--seconds``) measured at
   once by the energy counter (``mode="counter"``) and by integrated power
   sampling (``mode="sampling"``), printing both and their ratio;
3. inference samples/J of a small MLP (random weights) at two batch sizes.

Usage (on a machine with an NVIDIA GPU, CUDA torch and nvidia-ml-py)::

    python scripts/gpu_check.py [--gpu 0] [--seconds 10] [--idle-s 5] [--out docs/gpu-check.md]

``--device cpu --allow-no-cuda`` runs the plumbing without CUDA (the tests use
it against a fake ``pynvml``); its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_workload(device: str, seconds: float, n: int = 4096) -> int:
    """Square fp32 matmuls for about ``seconds``; returns how many ran."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=g)
    b = torch.randn(n, n, device=device, generator=g)
    _sync(device)
    count = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            a = torch.tanh(a @ b)  # tanh keeps values bounded
        _sync(device)
        count += 8
    return count


def samples_per_joule(meter: Any, device: str, batch_size: int, n_samples: int) -> dict[str, Any]:
    """Inference samples/J of a small MLP (784-1024-1024-10, random weights)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(device).eval()
    x = torch.randn(batch_size, 784, device=device)
    with torch.inference_mode():
        model(x)  # warm-up (kernels, allocator) outside the window
        _sync(device)
        steps = max(1, n_samples // batch_size)
        h = meter.start()
        for _ in range(steps):
            model(x)
        _sync(device)
        m = meter.stop(h)
    done = steps * batch_size
    return {"batch_size": batch_size, "samples": done, "duration_s": m.duration_s,
            "energy_j": m.energy_j, "samples_per_joule": done / m.energy_j if m.energy_j else None,
            "source": ",".join(sorted({c.source for c in m.components.values()}))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Check the NVML meter on a real GPU.")
    ap.add_argument("--gpu", type=int, default=0, help="CUDA index (default 0)")
    ap.add_argument("--seconds", type=float, default=10.0, help="matmul workload seconds")
    ap.add_argument("--idle-s", type=float, default=5.0, help="idle measurement seconds")
    ap.add_argument("--sampling-period-s", type=float, default=0.05)
    ap.add_argument("--matrix-n", type=int, default=4096, help="matmul size (default 4096)")
    ap.add_argument("--samples", type=int, default=200_000, help="inference samples per batch size")
    ap.add_argument("--batch-sizes", default="32,1024", help="two batch sizes (default 32,1024)")
    ap.add_argument("--device", default=None, help="torch device (default cuda:<gpu>)")
    ap.add_argument("--allow-no-cuda", action="store_true", help="plumbing test without CUDA")
    ap.add_argument("--out", help="also write the report to this markdown file")
    args = ap.parse_args(argv)

    import torch

    from ecopt.meters.idle import measure_idle
    from ecopt.meters.nvml import NVMLMeter

    device = args.device or f"cuda:{args.gpu}"
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: CUDA is not available to torch; run on a GPU machine", file=sys.stderr)
        return 2
    if not device.startswith("cuda") and not args.allow_no_cuda:
        print("gpu_check: --device without CUDA needs --allow-no-cuda (numbers are meaningless)",
              file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    counter = NVMLMeter(gpus=[args.gpu], mode="auto", counter_period_s=0.1)
    sampler = NVMLMeter(gpus=[args.gpu], mode="sampling",
                        sampling_period_s=args.sampling_period_s)
    info = counter.describe()["gpus"][0]
    lines: list[str] = []

    def out(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    out(f"# ecopt GPU check, {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC")
    out()
    out(f"- GPU: {info['name']} (CUDA index {args.gpu}, NVML index {info['nvml_index']}, "
        f"{info['method']}); torch {torch.__version__}, device {device}")
    idle_c = measure_idle(counter, args.idle_s)
    idle_s = measure_idle(sampler, args.idle_s)
    out(f"- idle power over {args.idle_s:g} s: {idle_c['power_w']:.2f} W ({info['method']}), "
        f"{idle_s['power_w']:.2f} W (power sampling every {args.sampling_period_s:g} s)")
    hc, hs = counter.start(), sampler.start()
    n_mm = matmul_workload(device, args.seconds, args.matrix_n)
    mc, ms = counter.stop(hc), sampler.stop(hs)
    c_src = next(iter(mc.components.values())).source
    ratio = ms.energy_j / mc.energy_j if mc.energy_j > 0 else float("nan")
    out()
    out(f"## Fixed matmul workload: {n_mm} fp32 {args.matrix_n}x{args.matrix_n} matmuls in "
        f"{mc.duration_s:.2f} s")
    out()
    out("| method | energy J | mean power W |")
    out("|---|---|---|")
    out(f"| {c_src} | {mc.energy_j:.1f} | {mc.power_w:.1f} |")
    out(f"| nvml-power-sampling ({args.sampling_period_s:g} s) | {ms.energy_j:.1f} | "
        f"{ms.power_w:.1f} |")
    out()
    out(f"sampling / counter ratio: {ratio:.4f}")
    out()
    out(f"## Inference samples/J, MLP 784-1024-1024-10, {args.samples} samples per batch size")
    out()
    out("| batch size | samples | duration s | energy J | samples/J | source |")
    out("|---|---|---|---|---|---|")
    for bs in sizes:
        r = samples_per_joule(counter, device, bs, args.samples)
        spj = f"{r['samples_per_joule']:.1f}" if r["samples_per_joule"] else "n/a"
        out(f"| {bs} | {r['samples']} | {r['duration_s']:.3f} | {r['energy_j']:.2f} | {spj} | "
            f"{r['source']} |")
    counter.close()
    sampler.close()
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
