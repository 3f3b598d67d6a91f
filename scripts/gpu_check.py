"""One prepared run that validates ecopt's GPU path on an NVIDIA GPU, in at most 8 minutes.

Usage (on a machine with an NVIDIA GPU, its driver, CUDA torch and nvidia-ml-py)::

    python scripts/gpu_check.py --out docs/gpu/$(date +%F)

``--dry-run`` runs the same flow on the CPU against a fake ``pynvml``
(:mod:`tests/fake_pynvml.py`) at toy sizes, in well under 3 minutes on two
cores: it proves the plumbing, its numbers mean nothing about hardware.

Sections, in order (each in its own ``try``: an error is recorded in the
results and the next section runs; results are rewritten after every section,
so a run cut short keeps what it measured):

1. ``environment``: GPU, driver, CUDA, torch, memory, power-limit range.
2. ``idle``: idle power over a few seconds, by the energy counter and by
   sampled power.
3. ``counter_vs_power``: a steady matmul load measured at once by NVML's
   energy counter and by integrated sampled power; their agreement in %.
4. ``repeatability``: the same fixed work 5 times; coefficient of variation of
   its energy.
5. ``counter_resolution``: the counter's update period (polled under load) and
   the shortest window whose energy the counter resolves within 10% of the
   steady power.
6. ``power_limits``: the fixed work under three power limits (the range's
   minimum, middle and maximum) when NVML permits setting them; each limit is
   restored afterwards (the original is persisted first).
7. ``gemma_batch``: a 10-evaluation qLogNEHVI study of generation batch size
   at the Gemma-3 1B preset, next to a coarse batch grid on the same device
   (real CUDA OOM marks the ceiling): is the optimiser's best within 5% of the
   grid's best tokens/J?
8. ``nas_cnn``: a short CNN architecture search on CUDA (CIFAR-10 with
   ``--cifar10 DIR``, else digits).

Time: the whole run has ``--budget-s`` (420 s by default; with the 30 s grace
and start-up it stays under 8 minutes). Each section gets a
share; a section that no longer fits is skipped (recorded as such), the
experiment sections stop starting trials at their deadline, and a watchdog
writes the results, restores any power limit this process set, and exits if
the budget is overrun by ``--grace-s``.

Output (``--out DIR``): ``summary.json`` (every figure, per section, with the
recorded-run header: command, date, git commit, versions, machine, energy
provenance) and ``summary.md``; the experiments' study folders under
``DIR/gemma_batch`` and ``DIR/nas_cnn``. Exit status: 0 when every section ran
or was skipped for time, 1 when a section failed, 3 when the watchdog stopped
the run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import math
import os
import shlex
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Sections in run order: (name, share of the budget, least seconds worth starting it with).
SECTIONS: tuple[tuple[str, float, float], ...] = (
    ("environment", 0.01, 1.0),
    ("idle", 0.02, 3.0),
    ("counter_vs_power", 0.04, 5.0),
    ("repeatability", 0.04, 5.0),
    ("counter_resolution", 0.05, 5.0),
    ("power_limits", 0.06, 8.0),
    ("gemma_batch", 0.50, 60.0),
    ("nas_cnn", 0.20, 30.0),
)


class Settings:
    """Sizes and durations of the real run and of the dry run."""

    def __init__(self, dry: bool, args: argparse.Namespace) -> None:
        self.dry = dry
        self.idle_s = 0.3 if dry else 5.0
        self.load_s = 0.5 if dry else 10.0
        self.matrix_n = 256 if dry else 8192
        self.repeats = 5
        self.repeat_matmuls = 200 if dry else 1000
        self.windows_s = (0.4, 0.2, 0.1, 0.05, 0.02) if dry else (1.0, 0.5, 0.2, 0.1, 0.05,
                                                                   0.02, 0.01)
        self.windows_each = 3 if dry else 5
        self.poll_s = 0.5 if dry else 2.0
        self.limit_matmuls = 200 if dry else 1500
        self.sampling_period_s = 0.02 if dry else 0.05
        # CPU threads of the experiments' own CPU work (the optimiser's model fitting).
        self.threads = 1 if dry else max(1, min(8, (os.cpu_count() or 2) // 2))
        self.gemma = (["--hidden", "32", "--layers", "1", "--vocab", "128", "--max-new-tokens", "4",
                       "--prompt-len", "4", "--min-window-s", "0", "--grid", "1,8,64,4096",
                       "--max-memory-gb", "0.02", "--max-batch", "4096", "--n-init", "3"]
                      if dry else
                      ["--preset", args.preset, "--max-new-tokens", "16", "--prompt-len", "16",
                       "--min-window-s", "0.5", "--grid", args.grid, "--n-init", "4"])
        self.nas = (["--quick", "--n-init", "2", "--trials", "3"] if dry else
                    ["--trials", "8", "--n-init", "4", "--epochs", "2", "--inference-passes", "20"])


class Terminated(BaseException):
    """SIGTERM arrived: unwind (restoring power limits), save, exit."""


def _run_experiment(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """An experiment's main(); its SystemExit (bad arguments, no CUDA) becomes an error here."""
    try:
        return main(argv)
    except SystemExit as exc:
        raise RuntimeError(f"the experiment exited: {exc}") from None


class Check:
    """The run's state: results, output folder, budget, and the current section."""

    def __init__(self, args: argparse.Namespace, argv: list[str]) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.t0 = time.monotonic()
        self.deadline = self.t0 + args.budget_s
        self.dry = bool(args.dry_run)
        self.s = Settings(self.dry, args)
        self.lock = threading.RLock()
        self.current: str | None = None
        self.command = "python scripts/gpu_check.py " + " ".join(shlex.quote(a) for a in argv)
        self.results: dict[str, Any] = {
            "script": "scripts/gpu_check.py", "command": self.command,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "dry_run": self.dry, "budget_s": args.budget_s, "status": "running",
            "sections": {},
        }
        self.device = "cpu" if self.dry else "cuda:0"
        self.gpu = 0  # CUDA index inside this process (--gpu is applied via CUDA_VISIBLE_DEVICES)

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def record(self, name: str, entry: dict[str, Any]) -> None:
        with self.lock:
            self.results["sections"][name] = entry
        self.save()

    def save(self, status: str | None = None) -> None:
        """Write summary.json and summary.md (atomically; called after every section)."""
        with self.lock:
            if status is not None:
                self.results["status"] = status
            self.results["elapsed_s"] = round(time.monotonic() - self.t0, 1)
            data = json.dumps(self.results, indent=2, default=str) + "\n"
            md = render_markdown(self.results)
            for name, text in (("summary.json", data), ("summary.md", md)):
                tmp = self.out / f".{name}.tmp"
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, self.out / name)


# -- helpers --------------------------------------------------------------------------------


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


class MatmulLoad:
    """Square matmuls into a fixed output (bf16 on a GPU, fp32 on the CPU): a steady load."""

    def __init__(self, device: str, n: int) -> None:
        import torch

        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        g = torch.Generator(device=device).manual_seed(0)
        self.device = device
        self.a = torch.randn(n, n, device=device, dtype=dtype, generator=g)
        self.b = torch.randn(n, n, device=device, dtype=dtype, generator=g)
        self.c = torch.empty(n, n, device=device, dtype=dtype)
        self.flops = 2 * n ** 3
        self.run(3)  # kernels chosen, clocks up

    def run(self, count: int) -> None:
        import torch

        for _ in range(count):
            torch.matmul(self.a, self.b, out=self.c)
        _sync(self.device)

    def run_for(self, seconds: float, chunk: int = 20) -> int:
        done, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.run(chunk)
            done += chunk
        return done

    @contextlib.contextmanager
    def background(self) -> Iterator[None]:
        """Keep the device busy from a thread while the block runs."""
        stop = threading.Event()

        def loop() -> None:
            # Enough work per call that the device stays busy while this thread waits
            # for the interpreter lock between calls.
            while not stop.is_set():
                self.run(20)

        th = threading.Thread(target=loop, daemon=True, name="gpu-check-load")
        th.start()
        try:
            yield
        finally:
            stop.set()
            th.join(timeout=30)


def _nvml_handle(gpu: int) -> tuple[Any, Any]:
    import importlib

    from ecopt.meters.nvml import visible_gpus

    nv = importlib.import_module("pynvml")
    nv.nvmlInit()
    return nv, visible_gpus(nv)[gpu][1]


def _cv(values: list[float]) -> float:
    import numpy as np

    v = np.asarray(values, dtype=float)
    return float(v.std(ddof=1) / v.mean()) if len(v) > 1 and v.mean() else math.nan


def _load_experiment(name: str) -> Any:
    exp = str(ROOT / "experiments")
    if exp not in sys.path:
        sys.path.insert(0, exp)
    from _common import load_script

    return load_script(name)


# -- sections ---------------------------------------------------------------------------------


def sec_environment(ck: Check, deadline: float) -> dict[str, Any]:
    import torch

    from ecopt.host import host_facts

    out: dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
                           "cuda_available": torch.cuda.is_available(), "device": ck.device,
                           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
    h = host_facts()
    out["host"] = {k: h.get(k) for k in ("hostname", "cpu_model", "cpu_count", "ram_gb", "gpus",
                                         "os", "python", "libraries")}
    if ck.device.startswith("cuda"):
        p = torch.cuda.get_device_properties(ck.device)
        out.update(gpu_name=p.name, gpu_memory_gb=p.total_memory / 1e9,
                   capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count)
    nv, hd = _nvml_handle(ck.gpu)
    out["nvml_name"] = _text(nv.nvmlDeviceGetName(hd))
    out["nvml_uuid"] = _text(nv.nvmlDeviceGetUUID(hd))
    with contextlib.suppress(Exception):
        out["driver"] = _text(nv.nvmlSystemGetDriverVersion())
    with contextlib.suppress(Exception):
        out["energy_counter"] = bool(nv.nvmlDeviceGetTotalEnergyConsumption(hd) is not None)
    with contextlib.suppress(Exception):
        lo, hi = nv.nvmlDeviceGetPowerManagementLimitConstraints(hd)
        out.update(power_limit_min_w=lo / 1000, power_limit_max_w=hi / 1000,
                   power_limit_w=nv.nvmlDeviceGetPowerManagementLimit(hd) / 1000)
    with contextlib.suppress(Exception):
        out["persistence_mode"] = int(nv.nvmlDeviceGetPersistenceMode(hd))
    with ck.lock:
        ck.results["machine"] = (f"{out.get('gpu_name') or out['nvml_name']}"
                                 f"{' (FAKE, dry run)' if ck.dry else ''}; "
                                 f"{h.get('cpu_model')}, {h.get('cpu_count')} cores, "
                                 f"{h.get('ram_gb')} GiB RAM")
    return out


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _meters(ck: Check) -> tuple[Any, Any]:
    from ecopt.meters.nvml import NVMLMeter

    counter = NVMLMeter(gpus=[ck.gpu], mode="auto", counter_period_s=0.1)
    sampler = NVMLMeter(gpus=[ck.gpu], mode="sampling", sampling_period_s=ck.s.sampling_period_s)
    return counter, sampler


def sec_idle(ck: Check, deadline: float) -> dict[str, Any]:
    counter, sampler = _meters(ck)
    try:
        _sync(ck.device)
        time.sleep(min(1.0, ck.s.idle_s / 5))  # let clocks settle after start-up work
        hc, hs = counter.start(), sampler.start()
        time.sleep(min(ck.s.idle_s, max(0.1, deadline - time.monotonic() - 1)))
        mc, ms = counter.stop(hc), sampler.stop(hs)
    finally:
        counter.close()
        sampler.close()
    c = next(iter(mc.components.values()))
    return {"seconds": mc.duration_s, "power_w_counter": mc.power_w, "counter_source": c.source,
            "power_w_sampled": ms.power_w,
            "sampling_period_s": ck.s.sampling_period_s}


def sec_counter_vs_power(ck: Check, deadline: float) -> dict[str, Any]:
    load = MatmulLoad(ck.device, ck.s.matrix_n)
    counter, sampler = _meters(ck)
    try:
        seconds = min(ck.s.load_s, max(0.2, deadline - time.monotonic() - 2))
        hc, hs = counter.start(), sampler.start()
        n = load.run_for(seconds)
        mc, ms = counter.stop(hc), sampler.stop(hs)
    finally:
        counter.close()
        sampler.close()
    src = next(iter(mc.components.values())).source
    agree = 100.0 * (ms.energy_j - mc.energy_j) / mc.energy_j if mc.energy_j > 0 else math.nan
    return {"matmuls": n, "matrix_n": ck.s.matrix_n, "seconds": mc.duration_s,
            "energy_j_counter": mc.energy_j, "counter_source": src, "power_w_counter": mc.power_w,
            "energy_j_sampled": ms.energy_j, "power_w_sampled": ms.power_w,
            "sampling_period_s": ck.s.sampling_period_s, "sampled_minus_counter_pct": agree,
            "tflops": n * load.flops / mc.duration_s / 1e12 if mc.duration_s else None}


def sec_repeatability(ck: Check, deadline: float) -> dict[str, Any]:
    load = MatmulLoad(ck.device, ck.s.matrix_n)
    counter, _ = _meters(ck)
    runs: list[dict[str, float]] = []
    try:
        for _ in range(ck.s.repeats):
            if time.monotonic() > deadline:
                break
            h = counter.start()
            load.run(ck.s.repeat_matmuls)
            m = counter.stop(h)
            runs.append({"energy_j": m.energy_j, "duration_s": m.duration_s,
                         "source": next(iter(m.components.values())).source})
    finally:
        counter.close()
    e = [r["energy_j"] for r in runs]
    d = [r["duration_s"] for r in runs]
    return {"matmuls_per_run": ck.s.repeat_matmuls, "runs": runs, "repeats": len(runs),
            "energy_cv": _cv(e), "duration_cv": _cv(d),
            "mean_energy_j": sum(e) / len(e) if e else None}


def sec_counter_resolution(ck: Check, deadline: float) -> dict[str, Any]:
    load = MatmulLoad(ck.device, ck.s.matrix_n)
    nv, hd = _nvml_handle(ck.gpu)

    def read() -> tuple[float, int]:
        return time.perf_counter(), int(nv.nvmlDeviceGetTotalEnergyConsumption(hd))

    with load.background():
        # 1. The update period: poll the counter and time its changes.
        changes: list[float] = []
        t_end = time.perf_counter() + ck.s.poll_s
        _, e_last = read()
        reads = 1
        while time.perf_counter() < t_end:
            time.sleep(1e-4)  # lets the load thread in; ~0.1 ms is far below the period
            t, e = read()
            reads += 1
            if e != e_last:
                changes.append(t)
                e_last = e
        gaps = sorted(b - a for a, b in zip(changes, changes[1:]))
        period = gaps[len(gaps) // 2] if gaps else None
        # 2. Steady power over a long window, then windows of decreasing length.
        t0, e0 = read()
        time.sleep(min(1.0 if not ck.dry else 0.4, max(0.1, deadline - time.monotonic() - 3)))
        t1, e1 = read()
        steady_w = (e1 - e0) / 1000 / (t1 - t0)
        windows: list[dict[str, Any]] = []
        for w in ck.s.windows_s:
            if time.monotonic() + w * ck.s.windows_each > deadline:
                windows.append({"window_s": w, "skipped": "time budget"})
                continue
            errs, zeros = [], 0
            for _ in range(ck.s.windows_each):
                a_t, a_e = read()
                time.sleep(w)
                b_t, b_e = read()
                if b_e == a_e:
                    zeros += 1
                p = (b_e - a_e) / 1000 / (b_t - a_t)
                errs.append(100.0 * (p - steady_w) / steady_w if steady_w else math.nan)
            med = sorted(abs(x) for x in errs)[len(errs) // 2]
            windows.append({"window_s": w, "zero_reads": zeros, "errors_pct": errs,
                            "median_abs_error_pct": med,
                            "resolved": zeros == 0 and med <= 10.0})
    # The shortest window such that it and every longer one resolved.
    shortest = None
    for x in windows:  # longest first
        if not x.get("resolved"):
            break
        shortest = x["window_s"]
    return {"polls": reads, "counter_changes": len(changes), "update_period_s": period,
            "steady_power_w": steady_w, "windows": windows,
            "shortest_resolved_window_s": shortest,
            "rule": "the shortest window length at which, and above which, every window read a "
                    "change and the median |error| of its power vs the steady power is <= 10%"}


def _limit_state(ck: Check) -> Path | None:
    """The power-limit state file: the default one on a GPU (so any later study open repairs a
    killed run), one in the output folder for the dry run's fake GPU."""
    return ck.out / "power-limit-state.json" if ck.dry else None


def sec_power_limits(ck: Check, deadline: float) -> dict[str, Any]:
    from ecopt.errors import PowerLimitError
    from ecopt.meters.power_limit import gpu_power_limit, power_limit_range

    lo, hi = power_limit_range(gpus=[ck.gpu])
    nv, hd = _nvml_handle(ck.gpu)
    original_w = nv.nvmlDeviceGetPowerManagementLimit(hd) / 1000
    limits = [lo, round((lo + hi) / 2), hi]
    load = MatmulLoad(ck.device, ck.s.matrix_n)
    counter, _ = _meters(ck)
    rows: list[dict[str, Any]] = []
    state = _limit_state(ck)
    try:
        for w in limits:
            if time.monotonic() > deadline:
                rows.append({"limit_w": w, "skipped": "time budget"})
                continue
            try:
                with gpu_power_limit(w, gpus=[ck.gpu], state_path=state):
                    set_w = nv.nvmlDeviceGetPowerManagementLimit(hd) / 1000
                    load.run(5)
                    h = counter.start()
                    load.run(ck.s.limit_matmuls)
                    m = counter.stop(h)
            except PowerLimitError as exc:
                return {"range_w": [lo, hi], "original_w": original_w, "permitted": False,
                        "error": str(exc)}
            rows.append({"limit_w": w, "limit_read_back_w": set_w, "energy_j": m.energy_j,
                         "duration_s": m.duration_s, "power_w": m.power_w,
                         "tflop_per_j": ck.s.limit_matmuls * load.flops / m.energy_j / 1e12
                         if m.energy_j else None})
    finally:
        counter.close()
    after_w = nv.nvmlDeviceGetPowerManagementLimit(hd) / 1000
    return {"range_w": [lo, hi], "original_w": original_w, "permitted": True,
            "matmuls_per_limit": ck.s.limit_matmuls, "limits": rows, "restored_w": after_w,
            "restored": abs(after_w - original_w) < 0.5}


def sec_gemma_batch(ck: Check, deadline: float) -> dict[str, Any]:
    gb = _load_experiment("gemma_batch")
    out = ck.out / "gemma_batch"
    left = max(5.0, deadline - time.monotonic())
    argv = ["--device", ck.device, "--meter", "nvml", "--trials", "10",
            "--sampler", "qlognehvi", "--out", str(out), "--quiet", "--time-budget-s",
            f"{left:.0f}", "--threads", str(ck.s.threads), *ck.s.gemma]
    rc = _run_experiment(gb.main, argv)
    facts = json.loads((out / "summary.json").read_text())
    opt, grid = facts.get("optimiser", {}), facts.get("grid", {})
    return {"argv": argv, "rc": rc, "model": facts.get("model"), "dtype": facts.get("dtype"),
            "max_batch": facts.get("max_batch"),
            "batch_predicted_to_fit": facts.get("batch_predicted_to_fit"),
            "optimiser_evaluations": opt.get("evaluations"),
            "optimiser_best_batch": opt.get("best_batch"),
            "optimiser_best_tokens_per_joule": opt.get("best_tokens_per_joule"),
            "optimiser_best_decode_tokens_per_joule": opt.get("best_decode_tokens_per_joule"),
            "optimiser_best_prefill_j_per_prompt": opt.get("best_prefill_j_per_prompt"),
            "baseline_tokens_per_joule": opt.get("baseline_tokens_per_joule"),
            "ratio_to_batch1": opt.get("ratio_to_batch1"),
            "payback_tokens": opt.get("payback_tokens"),
            "tokens_for_search_energy": opt.get("tokens_for_search_energy"),
            "grid_evaluations": grid.get("evaluations"), "grid_best_batch": grid.get("best_batch"),
            "grid_best_tokens_per_joule": grid.get("best_tokens_per_joule"),
            "best_fraction_of_grid_best": opt.get("best_fraction_of_grid_best"),
            "within_5pct_of_grid_best": opt.get("within_5pct_of_grid_best"),
            "infeasible": {"optimiser": opt.get("infeasible"), "grid": grid.get("infeasible")},
            "largest_feasible_batch": opt.get("largest_feasible_batch"),
            "smallest_infeasible_batch": opt.get("smallest_infeasible_batch"),
            "short_windows": opt.get("short_windows"), "stopped_early": facts.get("stopped_early"),
            "energy": facts.get("energy")}


def sec_nas_cnn(ck: Check, deadline: float) -> dict[str, Any]:
    nas = _load_experiment("nas_cnn")
    out = ck.out / "nas_cnn"
    left = max(5.0, deadline - time.monotonic())
    argv = ["--device", ck.device, "--meter", "nvml", "--methods", "qlognehvi", "--no-hand",
            "--out", str(out), "--quiet", "--time-budget-s", f"{left:.0f}",
            "--threads", str(ck.s.threads), *ck.s.nas]
    if ck.args.cifar10:
        argv += ["--cifar10", ck.args.cifar10]
    rc = _run_experiment(nas.main, argv)
    facts = json.loads((out / "summary.json").read_text())
    trials = [json.loads(line) for line in (out / "qlognehvi" / "trials.jsonl").read_text()
              .splitlines() if line.strip()]
    return {"argv": argv, "rc": rc, "data": facts.get("data"), "methods": facts.get("methods"),
            "trials": len(trials),
            "states": {s: sum(t["state"] == s for t in trials)
                       for s in ("complete", "failed", "infeasible")},
            "devices_seen": sorted({str(t.get("user_attrs", {}).get("device")) for t in trials}),
            "peak_device_memory_gb": max((t["metrics"].get("peak_device_memory_gb", 0.0)
                                          for t in trials), default=None),
            "stopped_early": facts.get("stopped_early"), "energy": facts.get("energy")}


SECTION_FUNCS: dict[str, Callable[[Check, float], dict[str, Any]]] = {
    "environment": sec_environment, "idle": sec_idle, "counter_vs_power": sec_counter_vs_power,
    "repeatability": sec_repeatability, "counter_resolution": sec_counter_resolution,
    "power_limits": sec_power_limits, "gemma_batch": sec_gemma_batch, "nas_cnn": sec_nas_cnn,
}


# -- the report ---------------------------------------------------------------------------------


def _f(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.{digits}g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def verdicts(results: dict[str, Any]) -> list[list[str]]:
    """One row per check: what, the figure, and whether it meets the expectation."""
    s = results.get("sections", {})

    def get(sec: str, key: str) -> Any:
        e = s.get(sec, {})
        return e.get("result", {}).get(key) if e.get("status") == "ok" else None

    rows = []
    agree = get("counter_vs_power", "sampled_minus_counter_pct")
    rows.append(["energy counter vs integrated sampled power (steady load)",
                 f"{_f(agree, 3)} %", _f(None if agree is None else abs(agree) <= 5.0)
                 + " (abs <= 5%)"])
    cv = get("repeatability", "energy_cv")
    rows.append(["energy of the same work, 5 repeats: coefficient of variation",
                 _f(cv, 3), _f(None if cv is None else cv <= 0.02) + " (<= 2%)"])
    rows.append(["energy counter update period (polled)",
                 f"{_f(get('counter_resolution', 'update_period_s'), 3)} s", "-"])
    rows.append(["shortest window the counter resolves (within 10%)",
                 f"{_f(get('counter_resolution', 'shortest_resolved_window_s'))} s", "-"])
    rows.append(["idle power (counter)", f"{_f(get('idle', 'power_w_counter'))} W", "-"])
    pl = s.get("power_limits", {}).get("result", {})
    rows.append(["power limits set and restored",
                 "not permitted" if pl.get("permitted") is False else
                 _f(pl.get("restored")), _f(pl.get("restored")) if pl else "-"])
    frac = get("gemma_batch", "best_fraction_of_grid_best")
    rows.append(["gemma_batch: optimiser best / grid best tokens/J", _f(frac, 3),
                 _f(None if frac is None else frac >= 0.95) + " (>= 0.95)"])
    dev = get("nas_cnn", "devices_seen")
    rows.append(["nas_cnn trials ran on", _f(", ".join(dev) if dev else None), "-"])
    return rows


def render_markdown(r: dict[str, Any]) -> str:
    """summary.md from the results (works on partial results)."""
    dry = r.get("dry_run")
    lines = [f"# ecopt GPU check{' (DRY RUN: CPU + fake NVML; numbers mean nothing)' if dry else ''}",
             "", f"- command: `{r.get('command')}`", f"- date: {r.get('date')}",
             f"- code: {r.get('git_commit') or '?'}", f"- machine: {r.get('machine') or '?'}",
             f"- energy: {json.dumps(r.get('energy'))}",
             f"- status: {r.get('status')}; elapsed {r.get('elapsed_s')} s of a "
             f"{r.get('budget_s')} s budget", ""]
    lines += ["## Checks", "", "| check | figure | meets expectation |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in verdicts(r)]
    lines += ["", "## Sections", "", "| section | status | seconds | note |", "|---|---|---|---|"]
    for name, e in r.get("sections", {}).items():
        note = e.get("error") or e.get("reason") or ""
        lines.append(f"| {name} | {e.get('status')} | {_f(e.get('seconds'), 3)} | "
                     f"{str(note).splitlines()[0][:160] if note else ''} |")
    for name, e in r.get("sections", {}).items():
        res = e.get("result")
        if not res:
            continue
        lines += ["", f"### {name}", ""]
        flat = {k: v for k, v in res.items() if not isinstance(v, (dict, list))}
        lines += ["| key | value |", "|---|---|"]
        lines += [f"| {k} | {_f(v)} |" for k, v in flat.items()]
        if name == "counter_resolution":
            lines += ["", "| window s | zero reads | median abs error % | resolved |",
                      "|---|---|---|---|"]
            for w in res.get("windows", []):
                lines.append(f"| {w['window_s']} | {_f(w.get('zero_reads'))} | "
                             f"{_f(w.get('median_abs_error_pct'), 3)} | "
                             f"{_f(w.get('resolved')) if 'skipped' not in w else w['skipped']} |")
        if name == "power_limits" and res.get("limits"):
            lines += ["", "| limit W | read back W | energy J | seconds | mean W | TFLOP/J |",
                      "|---|---|---|---|---|---|"]
            for w in res["limits"]:
                lines.append(f"| {_f(w.get('limit_w'))} | {_f(w.get('limit_read_back_w'))} | "
                             f"{_f(w.get('energy_j'))} | {_f(w.get('duration_s'))} | "
                             f"{_f(w.get('power_w'))} | {_f(w.get('tflop_per_j'))} |")
    return "\n".join(lines) + "\n"


# -- running ------------------------------------------------------------------------------------


def run_sections(ck: Check, names: list[str]) -> None:
    """Every section in its own try: errors are recorded, the next section runs."""
    plan = [(n, share, least) for n, share, least in SECTIONS if n in names]
    for name, share, least in plan:
        left = ck.left_s()
        # The section's share of the budget (at least what it needs), within what is left.
        allot = min(max(share * ck.args.budget_s, least), left)
        if allot < least:
            ck.record(name, {"status": "skipped", "reason": f"time budget ({left:.0f} s left, "
                                                            f"{least:.0f} s needed)"})
            continue
        ck.current = name
        t0 = time.monotonic()
        try:
            result = SECTION_FUNCS[name](ck, t0 + allot)
            entry: dict[str, Any] = {"status": "ok", "result": result}
        except Exception as exc:  # noqa: BLE001 - one broken section never loses the others
            entry = {"status": "error", "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc(limit=8)[-4000:]}
        entry["seconds"] = round(time.monotonic() - t0, 2)
        entry["allotted_s"] = round(allot, 1)
        ck.current = None
        ck.record(name, entry)


def _common_module() -> Any:
    """experiments/_common.py, imported the way the experiment scripts import it."""
    exp = str(ROOT / "experiments")
    if exp not in sys.path:
        sys.path.insert(0, exp)
    import _common

    return _common


def _header(ck: Check) -> None:
    head = _common_module().run_header(ck.command, ("nvml", not ck.dry,
                                     "FAKE NVML (dry run): no energy was measured" if ck.dry else
                                     "NVML energy counter and sampled power of the GPU "
                                     "(measured); host CPU energy not included"))
    with ck.lock:
        for k in ("git_commit", "versions"):
            ck.results[k] = head[k]
        ck.results["energy"] = head["energy"]
        ck.results.setdefault("machine", head["machine"])


def _watchdog(ck: Check) -> threading.Timer:
    def fire() -> None:
        with ck.lock:
            where = ck.current
            if where is not None:
                ck.results["sections"][where] = {
                    "status": "aborted", "reason": f"the watchdog stopped the run in this "
                                                   f"section at {ck.args.budget_s + ck.args.grace_s:.0f} s"}
        with contextlib.suppress(Exception):
            from ecopt.meters.power_limit import restore_stale_power_limits

            restore_stale_power_limits(_limit_state(ck), include_this_process=True)
        ck.save(status="stopped by the watchdog (budget overrun)")
        sys.stderr.write(f"gpu_check: budget overrun in section {where}; results in {ck.out}\n")
        sys.stderr.flush()
        os._exit(3)

    t = threading.Timer(ck.args.budget_s + ck.args.grace_s, fire)
    t.daemon = True
    t.start()
    return t


@contextlib.contextmanager
def _dry_run_hardware(fake_nvml: contextlib.AbstractContextManager[Any]) -> Iterator[Any]:
    """The dry run's stand-in hardware: the fake NVML, metered for CPU trials.

    The dry run computes on the CPU, and a CPU trial declares no GPU (its NVML
    meter then reads none); so the experiments' ``--meter nvml`` is built with
    ``gpus=[0]`` here, which meters the fake GPU whatever the trial declares.
    The real run's trials declare ``cuda:0`` and need no such thing.
    """
    import ecopt.meters

    real = ecopt.meters.get_meter

    def get_meter(spec: Any = "auto", **options: Any) -> Any:
        if spec == "nvml":
            options.setdefault("gpus", [0])
        return real(spec, **options)

    with fake_nvml as nv:
        ecopt.meters.get_meter = get_meter  # type: ignore[assignment]
        try:
            yield nv
        finally:
            ecopt.meters.get_meter = real  # type: ignore[assignment]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", required=True, help="results folder (summary.json, summary.md, studies)")
    p.add_argument("--gpu", type=int, default=0,
                   help="index of the GPU to check (applied as CUDA_VISIBLE_DEVICES unless that "
                        "is set already, in which case GPU 0 of it is checked)")
    p.add_argument("--budget-s", type=float, default=420.0,
                   help="time budget of the whole run (with --grace-s and start-up: < 8 min)")
    p.add_argument("--grace-s", type=float, default=30.0,
                   help="the watchdog stops the run this long after the budget")
    p.add_argument("--dry-run", action="store_true",
                   help="the whole flow on the CPU against a fake pynvml, toy sizes")
    p.add_argument("--sections", default=",".join(n for n, _, _ in SECTIONS),
                   help="comma-separated sections to run")
    p.add_argument("--preset", default="1b", choices=["270m", "1b", "4b", "12b"],
                   help="gemma_batch's model (real run)")
    p.add_argument("--grid", default="1,8,64,512,4096,32768",
                   help="gemma_batch's coarse batch grid (real run)")
    p.add_argument("--cifar10", default=None, metavar="DIR",
                   help="nas_cnn on CIFAR-10 python batches from DIR (default: digits)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    names = [n.strip() for n in args.sections.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTION_FUNCS]
    if unknown:
        raise SystemExit(f"--sections: unknown {unknown}; choose from {list(SECTION_FUNCS)}")
    if not args.budget_s > 0:
        raise SystemExit(f"--budget-s > 0 must hold, got {args.budget_s}")
    if not args.dry_run:
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(args.gpu))
    ck = Check(args, argv)
    ck.save()
    fake: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if ck.dry:
        import torch

        # The fake NVML is a test fixture: it lives in the repository's tests folder.
        if str(ROOT / "tests") not in sys.path:
            sys.path.insert(0, str(ROOT / "tests"))
        from fake_pynvml import FakeGpu, installed_fake_pynvml

        torch.set_num_threads(1)  # toy sizes: one thread, no spinning against other jobs
        fake = _dry_run_hardware(installed_fake_pynvml([FakeGpu(
            name="Fake GPU (dry run)", live=True, power_mw=250_000, counter_period_s=0.02,
            power_limit_mw=300_000, default_limit_mw=300_000, min_limit_mw=100_000,
            max_limit_mw=350_000)]))
    else:
        import torch

        if not torch.cuda.is_available():
            ck.save(status="no CUDA: torch sees no GPU (use --dry-run on a machine without one)")
            print("gpu_check: CUDA is not available to torch; run on a GPU machine or use "
                  "--dry-run", file=sys.stderr)
            return 2
    dog = _watchdog(ck)
    old_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        raise Terminated()  # unwinds the sections: power limits are restored on the way

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    status = "finished"
    try:
        with fake:
            try:
                _header(ck)
            except Exception as exc:  # noqa: BLE001 - the header is nice to have
                ck.results["header_error"] = f"{type(exc).__name__}: {exc}"
            run_sections(ck, names)
    except (Terminated, KeyboardInterrupt) as exc:
        status = f"interrupted ({'SIGTERM' if isinstance(exc, Terminated) else 'Ctrl-C'})"
        if ck.current is not None:
            ck.results["sections"][ck.current] = {"status": "aborted", "reason": status}
        ck.save(status=status)
        return 130 if isinstance(exc, KeyboardInterrupt) else 143
    finally:
        dog.cancel()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, old_term)
        ck.save(status=status)
        print(f"gpu_check: {status} in {time.monotonic() - ck.t0:.0f} s; results in {ck.out}",
              file=sys.stderr)
    failed = [n for n, e in ck.results["sections"].items() if e.get("status") == "error"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
