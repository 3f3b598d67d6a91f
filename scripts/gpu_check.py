"""One prepared run that validates ecopt's GPU path on an NVIDIA or AMD GPU, in at most 8 minutes.

Usage (on a machine with an NVIDIA GPU, its driver, CUDA torch and nvidia-ml-py; or an
AMD GPU with ROCm torch, amdsmi and ``pip install 'ecopt[zeus]'``), from the repository
root; the results go to ``docs/gpu/<today>/`` (``--out`` for elsewhere)::

    python scripts/gpu_check.py                 # --vendor auto: NVIDIA if NVML works, else AMD

``--vendor amd`` reads the GPU through Zeus's device layer (``ecopt.meters.amd``:
the raw counter is Zeus's ``AMDGPU.get_total_energy_consumption``, the meters are
``AMDMeter``); the sections are the same, except that power limits are set on
NVIDIA GPUs only (an AMD run records them as not supported). Power limits go
through NVML as root and through zeusd (``ZEUSD_SOCK_PATH``) without
CAP_SYS_ADMIN (:mod:`ecopt.meters.power_limit`); the section records which.

``--dry-run`` runs the same flow on the CPU against the fake ``pynvml`` of the
repository's tests (``tests/fake_pynvml.py``; with ``--vendor amd`` the fake
``amdsmi`` under Zeus, ``tests/fake_amdsmi.py``) at toy sizes, in well under 3
minutes on two cores: it proves the plumbing, its numbers mean nothing about hardware.

Sections, in order (each in its own ``try``: an error is recorded in the
results and the next section runs; results are rewritten after every section,
so a run cut short keeps what it measured):

1. ``environment``: GPU, driver, CUDA, torch, memory, power-limit range, the
   enforced limit, MIG mode, the instant-power field, and torch's device UUID
   beside NVML's (do CUDA and NVML name the same GPU?).
2. ``idle``: idle power over a few seconds, tick-aligned.
3. ``counter_vs_power``: after a warm-up under load, a steady matmul load
   measured over a window aligned to the energy counter's ticks, at once by
   the counter and by integrated sampled (instant) power; their agreement in %.
4. ``repeatability``: the same work 5 times, each in a tick-aligned window
   (the load running across both edges); coefficient of variation of its energy.
5. ``counter_resolution``: the counter's update period (polled under load)
   against the one the meter measured at start-up; a multi-second
   tick-aligned steady reference; then windows of 1 s down to 10 ms, as the
   NVML meter measures them (instant power below one period), against it.
6. ``power_limits``: the same work, warm and tick-aligned, under three power
   limits (the range's minimum, middle and maximum) when NVML permits setting
   them; each limit read back as NVML enforces it, and restored afterwards.
7. ``gemma_batch``: a grid of generation batch sizes at the Gemma-3 1B preset
   first (1 to 32,768, finer above 4,096 where the H200 run's best sat; real
   CUDA OOM marks the ceiling), then a 10-evaluation qLogNEHVI study: is the
   optimiser's best within 5% of the grid's best tokens/J, and did it get there
   for less energy (trials + its proposals) than the whole grid spent? Not
   applicable when the grid was cut short.
8. ``nas_cnn``: a short CNN architecture search on CUDA (CIFAR-10 with
   ``--cifar10 DIR``, else digits).

Every check gets a verdict (:func:`verdicts`): ``pass``, ``FAIL``, ``not
supported`` (the GPU or driver lacks the feature), ``not permitted`` (no
root), ``not applicable`` (its precondition did not hold, e.g. the grid was
cut), ``not run`` (its section failed or was skipped) or ``info`` (a figure
with no pass line). docs/gpu.md says what each check's pass line is and why.

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
    ("counter_vs_power", 0.06, 6.0),
    ("repeatability", 0.06, 6.0),
    ("counter_resolution", 0.06, 6.0),
    ("power_limits", 0.08, 8.0),
    ("gemma_batch", 0.45, 60.0),
    ("nas_cnn", 0.18, 30.0),
)

#: Pass lines of the checks (docs/gpu.md says why each is where it is).
PASS_COUNTER_VS_POWER_PCT = 5.0
PASS_REPEATABILITY_CV = 0.02
PASS_WINDOW_ERROR_PCT = 10.0
PASS_PERIOD_AGREEMENT = 0.2
PASS_GRID_FRACTION = 0.95


class Settings:
    """Sizes and durations of the real run and of the dry run."""

    def __init__(self, dry: bool, args: argparse.Namespace) -> None:
        self.dry = dry
        self.idle_s = 0.3 if dry else 5.0
        self.warm_s = 0.3 if dry else 5.0  # load before any comparison window
        self.load_s = 0.5 if dry else 10.0
        self.matrix_n = 256 if dry else 8192
        self.repeats = 5
        self.repeat_s = 0.2 if dry else 1.5  # each repeat's work, at least
        self.reference_s = 0.6 if dry else 3.0  # the steady reference of counter_resolution
        self.windows_s = (0.4, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005) if dry else (
            1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01)
        self.windows_each = 3 if dry else 5
        self.poll_s = 0.5 if dry else 2.0
        self.limit_s = 0.3 if dry else 3.0
        self.sampling_period_s = 0.02 if dry else 0.05
        # CPU threads of the experiments' own CPU work (the optimiser's model fitting).
        self.threads = 1 if dry else max(1, min(8, (os.cpu_count() or 2) // 2))
        self.grid = "1,8,64,4096" if dry else args.grid
        common = (["--hidden", "32", "--layers", "1", "--vocab", "128", "--max-new-tokens", "4",
                   "--prompt-len", "4", "--min-window-s", "0", "--max-memory-gb", "0.02",
                   "--max-batch", "4096"]
                  if dry else
                  ["--preset", args.preset, "--max-new-tokens", "16", "--prompt-len", "16",
                   "--min-window-s", "0.5"])
        self.gemma = common
        self.gemma_n_init = "3" if dry else "4"
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
        self.device = "cpu" if self.dry else "cuda:0"  # ROCm torch calls AMD GPUs cuda:N too
        self.vendor = str(getattr(args, "vendor", "nvidia"))  # resolved by main()
        self.meter = "amd" if self.vendor == "amd" else "nvml"
        self.results["vendor"] = self.vendor
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
        self.run(3)  # kernels chosen

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
    def background(self, chunk: int = 20) -> Iterator[None]:
        """Keep the device busy from a thread while the block runs (``chunk`` matmuls a call)."""
        stop = threading.Event()

        def loop() -> None:
            # Enough work per call that the device stays busy while this thread waits
            # for the interpreter lock between calls.
            while not stop.is_set():
                self.run(chunk)

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


class Counter:
    """The checked GPU's energy counter read directly (mJ), and windows aligned to its ticks.

    The counter changes once per update period, so a window read at arbitrary
    times is off by up to one period at each end. A window whose two edges are
    the instants the counter changed (seen within one poll, or one matmul
    under load) is not: its energy is exactly the counter's difference.
    """

    def __init__(self, gpu: int, vendor: str = "nvidia") -> None:
        self.nv: Any = None
        self.h: Any = None
        if vendor == "amd":
            from ecopt.meters.amd import zeus_amd_gpus

            dev = zeus_amd_gpus()[gpu]  # Zeus's AMDGPU: amdsmi's energy accumulator, in mJ
            self._read: Callable[[], int] = lambda: int(dev.get_total_energy_consumption())
        else:
            self.nv, self.h = _nvml_handle(gpu)
            self._read = lambda: int(self.nv.nvmlDeviceGetTotalEnergyConsumption(self.h))

    def read(self) -> tuple[float, int]:
        return time.perf_counter(), self._read()

    def tick(self, deadline: float, between: Callable[[], Any] | None = None) -> tuple[float, int]:
        """Wait for the counter's next change; ``between()`` runs between reads (e.g. one matmul).

        Returns ``(when, value)``: the middle of the two reads that saw the change.

        Raises:
            TimeoutError: when it does not change before ``deadline`` (monotonic).
        """
        t0, e0 = self.read()
        while True:
            if between is None:
                time.sleep(1e-4)
            else:
                between()
            t, e = self.read()
            if e != e0:
                # The change happened between the last two reads: take the middle.
                return (t0 + t) / 2, e
            t0 = t
            if time.monotonic() > deadline:
                raise TimeoutError("the GPU's energy counter did not change before the deadline")

    def aligned(self, load: MatmulLoad, seconds: float, deadline: float,
                on_start: Callable[[], Any] | None = None,
                on_stop: Callable[[], Any] | None = None) -> dict[str, float]:
        """Run matmuls from one counter tick to the first tick after ``seconds``.

        The load runs across both edges, so the interval ``[t_a, t_b]`` is steady
        load throughout; ``on_start`` / ``on_stop`` run right at the edges (to
        open and close a meter's window over the same interval).

        Returns:
            ``matmuls`` (run inside the interval), ``seconds``, ``energy_j``,
            ``power_w``, ``j_per_matmul``.
        """
        t_a, e_a = self.tick(deadline, lambda: load.run(1))
        if on_start is not None:
            on_start()
        n = 0
        while time.perf_counter() - t_a < seconds:
            load.run(1)
            n += 1
        count = [0]

        def one() -> None:
            load.run(1)
            count[0] += 1

        t_b, e_b = self.tick(deadline, one)
        if on_stop is not None:
            on_stop()
        n += count[0]
        e_j, dt = (e_b - e_a) / 1000.0, t_b - t_a
        return {"matmuls": n, "seconds": dt, "energy_j": e_j,
                "power_w": e_j / dt if dt > 0 else math.nan,
                "j_per_matmul": e_j / n if n else math.nan}


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


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _meters(ck: Check) -> tuple[Any, Any]:
    """The GPU meter as studies build it (counter period measured at start-up), and a sampler."""
    if ck.vendor == "amd":
        from ecopt.meters.amd import AMDMeter as GpuMeter
    else:
        from ecopt.meters.nvml import NVMLMeter as GpuMeter

    counter = GpuMeter(gpus=[ck.gpu], mode="auto")
    sampler = GpuMeter(gpus=[ck.gpu], mode="sampling", sampling_period_s=ck.s.sampling_period_s)
    return counter, sampler


# -- sections ---------------------------------------------------------------------------------


def sec_environment(ck: Check, deadline: float) -> dict[str, Any]:
    import torch

    from ecopt.host import host_facts
    from ecopt.meters.gpus import cuda_gpus
    from ecopt.meters.nvml import instant_power_mw

    out: dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
                           "cuda_available": torch.cuda.is_available(), "device": ck.device,
                           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
                           "CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER")}
    if ck.device.startswith("cuda"):
        p = torch.cuda.get_device_properties(ck.device)  # initialises CUDA: torch's UUIDs known
        out.update(gpu_name=p.name, gpu_memory_gb=p.total_memory / 1e9,
                   capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
                   torch_uuid=str(getattr(p, "uuid", None)))
    from ecopt.meters.auto import probe_backends

    # Every meter of the registry (NVML, and Zeus's AMD / Apple / Jetson / RAPL-through-zeusd):
    # what this machine offers beside the NVML GPU the sections below check.
    out["meters"] = {k: {"available": v["available"], "why": v["why"]}
                     for k, v in probe_backends().items()}
    out["vendor"] = ck.vendor
    if ck.vendor == "amd":
        return _environment_amd(ck, out)
    nv, hd = _nvml_handle(ck.gpu)
    out["nvml_name"] = _text(nv.nvmlDeviceGetName(hd))
    out["nvml_uuid"] = _text(nv.nvmlDeviceGetUUID(hd))
    g = cuda_gpus(nv)[ck.gpu]
    out["cuda_to_nvml"] = g.facts()
    if out.get("torch_uuid"):
        bare = out["nvml_uuid"].split("-", 1)[1] if out["nvml_uuid"].startswith("GPU-") \
            else out["nvml_uuid"]
        out["uuids_match"] = out["torch_uuid"] in (bare, out["nvml_uuid"])
    with contextlib.suppress(Exception):
        out["driver"] = _text(nv.nvmlSystemGetDriverVersion())
    with contextlib.suppress(Exception):
        out["energy_counter"] = bool(nv.nvmlDeviceGetTotalEnergyConsumption(hd) is not None)
    with contextlib.suppress(Exception):
        out["instant_power_field"] = instant_power_mw(nv, hd) is not None
    with contextlib.suppress(Exception):
        out["mig_mode"] = list(nv.nvmlDeviceGetMigMode(hd))
    with contextlib.suppress(Exception):
        lo, hi = nv.nvmlDeviceGetPowerManagementLimitConstraints(hd)
        out.update(power_limit_min_w=lo / 1000, power_limit_max_w=hi / 1000,
                   power_limit_w=nv.nvmlDeviceGetPowerManagementLimit(hd) / 1000)
    with contextlib.suppress(Exception):
        out["power_limit_enforced_w"] = nv.nvmlDeviceGetEnforcedPowerLimit(hd) / 1000
    with contextlib.suppress(Exception):
        out["persistence_mode"] = int(nv.nvmlDeviceGetPersistenceMode(hd))
    h = host_facts()
    out["host"] = {k: h.get(k) for k in ("hostname", "cpu_model", "cpu_count", "ram_gb", "gpus",
                                         "os", "python", "libraries")}
    with ck.lock:
        ck.results["machine"] = (f"{out.get('gpu_name') or out['nvml_name']}"
                                 f"{' (FAKE, dry run)' if ck.dry else ''}; "
                                 f"{h.get('cpu_model')}, {h.get('cpu_count')} cores, "
                                 f"{h.get('ram_gb')} GiB RAM")
    return out


def _environment_amd(ck: Check, out: dict[str, Any]) -> dict[str, Any]:
    """The AMD GPU as Zeus sees it: name, counter, power reading, power-cap range."""
    from ecopt.host import host_facts
    from ecopt.meters.amd import AMDMeter, zeus_amd_gpus

    m = AMDMeter(gpus=[ck.gpu])
    try:
        out["amd"] = m.describe()["gpus"][0]
    finally:
        m.close()
    dev = zeus_amd_gpus()[ck.gpu]
    with contextlib.suppress(Exception):
        lo, hi = dev.get_power_management_limit_constraints()
        out.update(power_limit_min_w=lo / 1000, power_limit_max_w=hi / 1000,
                   power_limit_w=dev.get_power_management_limit() / 1000)
    h = host_facts()
    with ck.lock:
        ck.results["machine"] = (f"{out.get('gpu_name') or out['amd']['name']}"
                                 f"{' (FAKE, dry run)' if ck.dry else ''}; "
                                 f"{h.get('cpu_model')}, {h.get('cpu_count')} cores, "
                                 f"{h.get('ram_gb')} GiB RAM")
    return out


def sec_idle(ck: Check, deadline: float) -> dict[str, Any]:
    _sync(ck.device)
    counter = Counter(ck.gpu, ck.vendor)
    _, sampler = _meters(ck)
    try:
        sampler.stop(sampler.start())  # its sampling thread runs before the window opens
        time.sleep(min(1.0, ck.s.idle_s / 5))  # let clocks settle after start-up work
        t_a, e_a = counter.tick(deadline)
        hs = sampler.start()
        time.sleep(min(ck.s.idle_s, max(0.1, deadline - time.monotonic() - 1)))
        t_b, e_b = counter.tick(deadline)
        ms = sampler.stop(hs)
    finally:
        sampler.close()
    return {"seconds": t_b - t_a, "power_w_counter": (e_b - e_a) / 1000 / (t_b - t_a),
            "power_w_sampled": ms.power_w, "sampling_period_s": ck.s.sampling_period_s,
            "sampled_reading": ms.components[f"gpu:{ck.gpu}"].note,
            "method": "tick-aligned counter window while the process sleeps"}


def sec_counter_vs_power(ck: Check, deadline: float) -> dict[str, Any]:
    load = MatmulLoad(ck.device, ck.s.matrix_n)
    counter = Counter(ck.gpu, ck.vendor)
    _, sampler = _meters(ck)
    sampler.stop(sampler.start())  # its sampling thread runs before the window opens
    warm = load.run_for(ck.s.warm_s)  # clocks and the 1 s average settle under load first
    box: dict[str, Any] = {}
    try:
        seconds = min(ck.s.load_s, max(0.3, deadline - time.monotonic() - 3))
        w = counter.aligned(load, seconds, deadline,
                            on_start=lambda: box.update(h=sampler.start()),
                            on_stop=lambda: box.update(m=sampler.stop(box["h"])))
        avg_w = None
        with contextlib.suppress(Exception):  # the 1 s average after a long steady load
            avg_w = counter.nv.nvmlDeviceGetPowerUsage(counter.h) / 1000
    finally:
        sampler.close()
    ms = box["m"]
    c = ms.components[f"gpu:{ck.gpu}"]
    agree = 100.0 * (ms.energy_j - w["energy_j"]) / w["energy_j"] if w["energy_j"] > 0 \
        else math.nan
    return {"warm_s": ck.s.warm_s, "warm_matmuls": warm, "matmuls": w["matmuls"],
            "matrix_n": ck.s.matrix_n, "seconds": w["seconds"],
            "energy_j_counter": w["energy_j"], "power_w_counter": w["power_w"],
            "energy_j_sampled": ms.energy_j, "power_w_sampled": ms.power_w,
            "sampled_reading": c.note, "sampled_flags": list(c.flags),
            "power_w_1s_average_after": avg_w,
            "sampling_period_s": ck.s.sampling_period_s, "sampled_minus_counter_pct": agree,
            "tflops": w["matmuls"] * load.flops / w["seconds"] / 1e12 if w["seconds"] else None,
            "method": "warm load, then one window from a counter tick to the first tick after "
                      f"{ck.s.load_s:g} s, the load running across both edges; the sampling "
                      "meter's window opened and closed at those ticks"}


def sec_repeatability(ck: Check, deadline: float) -> dict[str, Any]:
    load = MatmulLoad(ck.device, ck.s.matrix_n)
    counter = Counter(ck.gpu, ck.vendor)
    load.run_for(ck.s.warm_s / 2)
    runs: list[dict[str, float]] = []
    for _ in range(ck.s.repeats):
        if time.monotonic() + ck.s.repeat_s + 1 > deadline:
            break
        runs.append(counter.aligned(load, ck.s.repeat_s, deadline))
    jpm = [r["j_per_matmul"] for r in runs]
    spm = [r["seconds"] / r["matmuls"] for r in runs if r["matmuls"]]
    return {"seconds_per_run": ck.s.repeat_s, "runs": runs, "repeats": len(runs),
            "energy_cv": _cv(jpm), "duration_cv": _cv(spm),
            "mean_j_per_matmul": sum(jpm) / len(jpm) if jpm else None,
            "method": "each run: matmuls from a counter tick to the first tick after "
                      f"{ck.s.repeat_s:g} s (the load running across both edges); the figure is "
                      "its energy per matmul, i.e. the energy of the same work"}


def sec_counter_resolution(ck: Check, deadline: float) -> dict[str, Any]:
    from ecopt.meters.base import MIN_WINDOW_PERIODS

    load = MatmulLoad(ck.device, ck.s.matrix_n)
    counter = Counter(ck.gpu, ck.vendor)
    meter, _ = _meters(ck)
    meter_period = meter.update_period_s
    # Short chunks: the meter waits for queued work at both ends of its windows, and the
    # load thread's queue (2 matmuls, ~3 ms on a large GPU) must not stretch a 10 ms window.
    with load.background(chunk=2):
        time.sleep(min(ck.s.warm_s, 2.0))
        # 1. The update period: poll the counter and time its changes.
        changes: list[float] = []
        t_end = time.perf_counter() + ck.s.poll_s
        _, e_last = counter.read()
        reads = 1
        while time.perf_counter() < t_end:
            time.sleep(1e-4)  # lets the load thread in; ~0.1 ms is far below the period
            t, e = counter.read()
            reads += 1
            if e != e_last:
                changes.append(t)
                e_last = e
        period = (changes[-1] - changes[0]) / (len(changes) - 1) if len(changes) > 1 else None
        # 2. A multi-second steady reference, tick-aligned.
        t_a, e_a = counter.tick(deadline)
        time.sleep(min(ck.s.reference_s, max(0.2, deadline - time.monotonic() - 6)))
        t_b, e_b = counter.tick(deadline)
        steady_w = (e_b - e_a) / 1000 / (t_b - t_a)
        # 3. Windows of decreasing length, as the NVML meter measures them.
        windows: list[dict[str, Any]] = []
        for w in ck.s.windows_s:
            if time.monotonic() + (w + 0.01) * ck.s.windows_each > deadline:
                windows.append({"window_s": w, "skipped": "time budget"})
                continue
            errs, raw_errs, zeros, sources, flagged, lengths = [], [], 0, set(), 0, []
            for _ in range(ck.s.windows_each):
                h = meter.start()
                a_t, a_e = counter.read()
                time.sleep(w)
                b_t, b_e = counter.read()
                m = meter.stop(h)
                lengths.append(m.duration_s)
                c = m.components[f"gpu:{ck.gpu}"]
                sources.add(c.source)
                flagged += bool(c.flags)
                if b_e == a_e:
                    zeros += 1
                raw_errs.append(100.0 * ((b_e - a_e) / 1000 / (b_t - a_t) - steady_w) / steady_w)
                errs.append(100.0 * (m.power_w - steady_w) / steady_w)
            med = sorted(abs(x) for x in errs)[len(errs) // 2]
            actual = sorted(lengths)[len(lengths) // 2]  # as the meter timed them
            windows.append({"window_s": w, "meter_duration_s": actual,
                            "periods": actual / meter_period if meter_period else None,
                            "meter_sources": sorted(sources), "meter_flagged": flagged,
                            "meter_errors_pct": errs, "median_abs_error_pct": med,
                            "raw_counter_zero_reads": zeros,
                            "raw_counter_median_abs_error_pct":
                                sorted(abs(x) for x in raw_errs)[len(raw_errs) // 2],
                            "resolved": med <= PASS_WINDOW_ERROR_PCT})
    meter.close()
    # The shortest window such that it and every longer one resolved.
    shortest = None
    for x in windows:  # longest first
        if not x.get("resolved"):
            break
        shortest = x["window_s"]
    long_ok = [x["resolved"] for x in windows if "skipped" not in x and meter_period
               and x["meter_duration_s"] >= MIN_WINDOW_PERIODS * meter_period]
    short = [x for x in windows if "skipped" not in x and meter_period
             and x["meter_duration_s"] < meter_period]
    return {"polls": reads, "counter_changes": len(changes), "update_period_s": period,
            "meter_measured_period_s": meter_period,
            "meter_period_how": meter.describe()["gpus"][0]["counter_period"],
            "period_agreement": (abs(meter_period - period) / period
                                 if period and meter_period else None),
            "steady_power_w": steady_w, "steady_reference_s": t_b - t_a, "windows": windows,
            "shortest_resolved_window_s": shortest,
            "windows_of_10_periods_resolved": all(long_ok) if long_ok else None,
            "sub_period_windows_resolved": (all(x["resolved"] for x in short) if short else None),
            "sub_period_source": sorted({s for x in short for s in x["meter_sources"]}),
            "rule": "a window is resolved when the median |error| of the NVML meter's power over "
                    f"{ck.s.windows_each} windows vs the tick-aligned steady power is <= "
                    f"{PASS_WINDOW_ERROR_PCT:g}%"}


def _limit_state(ck: Check) -> Path | None:
    """The power-limit state file: the default one on a GPU (so `ecopt gpu restore` repairs a
    killed run), one in the output folder for the dry run's fake GPU."""
    return ck.out / "power-limit-state.json" if ck.dry else None


def sec_power_limits(ck: Check, deadline: float) -> dict[str, Any]:
    from ecopt.errors import PowerLimitError
    from ecopt.meters.power_limit import gpu_power_limit, power_limit_range, power_limit_via

    if ck.vendor == "amd":
        return {"supported": False, "via": None,
                "error": "ecopt sets GPU power limits on NVIDIA GPUs only (NVML, or zeusd "
                         "without root); AMD power caps are not wired in yet"}
    nv, hd = _nvml_handle(ck.gpu)
    try:
        # As root through NVML; without CAP_SYS_ADMIN through zeusd when ZEUSD_SOCK_PATH names one.
        via = power_limit_via()
        lo, hi = power_limit_range(gpus=[ck.gpu])
    except PowerLimitError as exc:
        if "does not support" in str(exc):
            return {"supported": False, "error": str(exc)}
        if "zeusd" in str(exc):
            return {"supported": True, "permitted": False, "via": "zeusd", "error": str(exc)}
        raise
    original_w = nv.nvmlDeviceGetPowerManagementLimit(hd) / 1000
    limits = [lo, round((lo + hi) / 2), hi]
    load = MatmulLoad(ck.device, ck.s.matrix_n)
    counter = Counter(ck.gpu, ck.vendor)
    rows: list[dict[str, Any]] = []
    state = _limit_state(ck)
    for w in limits:
        if time.monotonic() + ck.s.limit_s + 2 > deadline:
            rows.append({"limit_w": w, "skipped": "time budget"})
            continue
        try:
            with gpu_power_limit(w, gpus=[ck.gpu], state_path=state) as facts:
                requested_w = nv.nvmlDeviceGetPowerManagementLimit(hd) / 1000
                load.run_for(min(1.0, ck.s.limit_s / 3))  # clocks settle under the new limit
                m = counter.aligned(load, ck.s.limit_s, deadline)
        except PowerLimitError as exc:
            msg = str(exc)
            if "NO_PERMISSION" in msg or "zeusd" in msg:
                return {"range_w": [lo, hi], "original_w": original_w, "supported": True,
                        "permitted": False, "via": via, "error": msg}
            if "does not support" in msg:
                return {"range_w": [lo, hi], "original_w": original_w, "supported": False,
                        "error": msg}
            raise
        rows.append({"limit_w": w, "requested_read_back_w": requested_w,
                     "enforced_w": facts[0].enforced_w, "energy_j": m["energy_j"],
                     "seconds": m["seconds"], "matmuls": m["matmuls"], "power_w": m["power_w"],
                     "j_per_matmul": m["j_per_matmul"],
                     "tflop_per_j": load.flops / m["j_per_matmul"] / 1e12
                     if m["j_per_matmul"] else None})
    after_w = nv.nvmlDeviceGetPowerManagementLimit(hd) / 1000
    done = [r for r in rows if "skipped" not in r]
    return {"range_w": [lo, hi], "original_w": original_w, "supported": True, "permitted": True,
            "via": via, "limits": rows, "restored_w": after_w, "restored": abs(after_w - original_w) < 0.5,
            "enforced_as_requested": all(r["enforced_w"] is not None
                                         and abs(r["enforced_w"] - r["limit_w"]) < 1.0
                                         for r in done) if done else None}


def _gemma_records(study_dir: Path) -> list[dict[str, Any]]:
    path = study_dir / "trials.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sec_gemma_batch(ck: Check, deadline: float) -> dict[str, Any]:
    """The grid first (its best is the yardstick), then the optimiser."""
    gb = _load_experiment("gemma_batch")
    out = ck.out / "gemma_batch"
    grid_vals = [int(x) for x in ck.s.grid.split(",")]
    common = ["--device", ck.device, "--meter", ck.meter, "--quiet", "--threads",
              str(ck.s.threads), *ck.s.gemma, "--grid", ck.s.grid]
    left = max(5.0, deadline - time.monotonic())
    grid_argv = [*common, "--sampler", "grid", "--out", str(out / "grid_run"),
                 "--time-budget-s", f"{0.45 * left:.0f}"]
    rc_grid = _run_experiment(gb.main, grid_argv)
    grid_facts = json.loads((out / "grid_run" / "summary.json").read_text())
    grid_recs = _gemma_records(out / "grid_run" / "grid")
    left = max(5.0, deadline - time.monotonic())
    opt_argv = [*common, "--sampler", "qlognehvi", "--no-grid", "--trials", "10",
                "--n-init", ck.s.gemma_n_init, "--out", str(out / "optimiser_run"),
                "--time-budget-s", f"{left:.0f}"]
    rc_opt = _run_experiment(gb.main, opt_argv)
    facts = json.loads((out / "optimiser_run" / "summary.json").read_text())
    opt = facts.get("optimiser", {})
    search = grid_facts.get("search", {})

    def tpj(r: dict[str, Any]) -> float | None:
        v = {**r.get("metrics", {}), **r.get("values", {})}.get("tokens_per_joule")
        return float(v) if r.get("state") == "complete" and v is not None else None

    grid_done = sorted({int(r["params"]["batch_size"]) for r in grid_recs})
    grid_cut = [b for b in grid_vals if b not in grid_done]
    grid_best = max((v for r in grid_recs if (v := tpj(r)) is not None), default=None)
    opt_recs = _gemma_records(out / "optimiser_run" / "optimiser")
    opt_best = max((v for r in opt_recs if (v := tpj(r)) is not None), default=None)
    frac = opt_best / grid_best if opt_best is not None and grid_best else None
    target = PASS_GRID_FRACTION * grid_best if grid_best else None
    short = sum(bool(r.get("metrics", {}).get("decode_window_short")
                     or r.get("metrics", {}).get("prefill_window_short"))
                for r in grid_recs + opt_recs)
    return {"grid_argv": grid_argv, "optimiser_argv": opt_argv, "rc": [rc_grid, rc_opt],
            "model": facts.get("model"), "dtype": facts.get("dtype"),
            "max_batch": facts.get("max_batch"),
            "batch_predicted_to_fit": facts.get("batch_predicted_to_fit"),
            "grid": grid_vals, "grid_evaluated": grid_done, "grid_cut": grid_cut,
            "grid_evaluations": len(grid_recs), "grid_best_batch": search.get("best_batch"),
            "grid_best_tokens_per_joule": grid_best,
            "optimiser_evaluations": len(opt_recs),
            "optimiser_best_batch": opt.get("best_batch"),
            "optimiser_best_tokens_per_joule": opt_best,
            "optimiser_best_decode_tokens_per_joule": opt.get("best_decode_tokens_per_joule"),
            "optimiser_best_prefill_j_per_prompt": opt.get("best_prefill_j_per_prompt"),
            "baseline_tokens_per_joule": opt.get("baseline_tokens_per_joule"),
            "ratio_to_batch1": opt.get("ratio_to_batch1"),
            "payback_tokens": opt.get("payback_tokens"),
            "tokens_for_search_energy": opt.get("tokens_for_search_energy"),
            "best_fraction_of_grid_best": frac,
            # What each way of searching spent (trials + metered proposals, joules of the
            # run's meter), and what the optimiser had spent when it first reached the
            # grid's best (within PASS_GRID_FRACTION): issue 40's "for less energy".
            "grid_energy_j": gb.search_energy_j(grid_recs),
            "optimiser_energy_j": gb.search_energy_j(opt_recs),
            "optimiser_energy_to_grid_best_j": gb.search_energy_to_j(opt_recs, target, tpj),
            "infeasible": {"optimiser": opt.get("infeasible"), "grid": search.get("infeasible")},
            "largest_feasible_batch": max(
                [int(r["params"]["batch_size"]) for r in grid_recs + opt_recs
                 if r.get("state") == "complete"], default=None),
            "smallest_infeasible_batch": min(
                [int(r["params"]["batch_size"]) for r in grid_recs + opt_recs
                 if r.get("state") == "infeasible"], default=None),
            "trials_with_short_windows": short,
            "stopped_early": [x for x in (grid_facts.get("stopped_early"),
                                          facts.get("stopped_early")) if x],
            "energy": facts.get("energy")}


def sec_nas_cnn(ck: Check, deadline: float) -> dict[str, Any]:
    nas = _load_experiment("nas_cnn")
    out = ck.out / "nas_cnn"
    left = max(5.0, deadline - time.monotonic())
    argv = ["--device", ck.device, "--meter", ck.meter, "--methods", "qlognehvi", "--no-hand",
            "--out", str(out), "--quiet", "--time-budget-s", f"{left:.0f}",
            "--threads", str(ck.s.threads), *ck.s.nas]
    if ck.args.cifar10:
        argv += ["--cifar10", ck.args.cifar10]
    rc = _run_experiment(nas.main, argv)
    facts = json.loads((out / "summary.json").read_text())
    trials = _gemma_records(out / "qlognehvi")
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


def _judge(ok: bool | None) -> str:
    return "-" if ok is None else ("pass" if ok else "FAIL")


def verdicts(results: dict[str, Any]) -> list[list[str]]:
    """One row per check: what, the figure, the verdict, and the pass line.

    Verdicts: ``pass``, ``FAIL``, ``not supported``, ``not permitted``,
    ``not applicable: <why>``, ``not run: <status>`` (the section failed, was
    skipped or aborted) and ``info`` (a figure with no pass line).
    """
    s = results.get("sections", {})

    def res(sec: str) -> dict[str, Any] | None:
        e = s.get(sec, {})
        return e.get("result") if e.get("status") == "ok" else None

    def not_run(sec: str) -> str:
        e = s.get(sec)
        return "not run: " + ("not in this run" if e is None else str(e.get("status")))

    rows: list[list[str]] = []
    env = res("environment")
    if env is None:
        rows.append(["CUDA and NVML name the same GPU (UUIDs)", "-", not_run("environment"), "equal"])
    else:
        m = env.get("uuids_match")
        rows.append(["CUDA and NVML name the same GPU (UUIDs)",
                     f"{env.get('torch_uuid') or '-'} / {env.get('nvml_uuid')}",
                     "not applicable: no CUDA device (dry run)" if m is None else _judge(m),
                     "equal"])
    r = res("counter_vs_power")
    agree = None if r is None else r.get("sampled_minus_counter_pct")
    rows.append(["energy counter vs integrated sampled power (warm, tick-aligned)",
                 f"{_f(agree, 3)} %",
                 not_run("counter_vs_power") if r is None else
                 _judge(None if agree is None or agree != agree
                        else abs(agree) <= PASS_COUNTER_VS_POWER_PCT),
                 f"abs <= {PASS_COUNTER_VS_POWER_PCT:g}%"])
    r = res("repeatability")
    cv = None if r is None else r.get("energy_cv")
    rows.append([f"energy of the same work, {_f(None if r is None else r.get('repeats'))} "
                 "tick-aligned repeats: coefficient of variation", _f(cv, 3),
                 not_run("repeatability") if r is None else
                 _judge(None if cv is None or cv != cv else cv <= PASS_REPEATABILITY_CV),
                 f"<= {PASS_REPEATABILITY_CV:.0%}"])
    r = res("counter_resolution")
    if r is None:
        for what in ("energy counter update period: polled vs the meter's start-up measurement",
                     "windows of >= 10 counter periods, as the meter measures them",
                     "windows shorter than one period (priced at instant power)",
                     "shortest window the meter resolves"):
            rows.append([what, "-", not_run("counter_resolution"), "-"])
    else:
        agr = r.get("period_agreement")
        rows.append(["energy counter update period: polled vs the meter's start-up measurement",
                     f"{_f(r.get('update_period_s'), 3)} s / "
                     f"{_f(r.get('meter_measured_period_s'), 3)} s",
                     _judge(None if agr is None else agr <= PASS_PERIOD_AGREEMENT),
                     f"within {PASS_PERIOD_AGREEMENT:.0%}"])
        long_ok = r.get("windows_of_10_periods_resolved")
        rows.append(["windows of >= 10 counter periods, as the meter measures them",
                     "median error within 10%" if long_ok else "-",
                     "not applicable: no such window in the budget" if long_ok is None
                     else _judge(long_ok), f"median abs error <= {PASS_WINDOW_ERROR_PCT:g}%"])
        sub = r.get("sub_period_windows_resolved")
        src = r.get("sub_period_source") or []
        rows.append(["windows shorter than one period (priced at instant power)",
                     ", ".join(src) or "-",
                     "not applicable: no such window" if sub is None else
                     ("not supported: no instant-power field (priced at the 1 s average)"
                      if "nvml-average-power" in src and not sub else _judge(sub)),
                     f"median abs error <= {PASS_WINDOW_ERROR_PCT:g}%"])
        rows.append(["shortest window the meter resolves",
                     f"{_f(r.get('shortest_resolved_window_s'))} s", "info", "-"])
    r = res("idle")
    rows.append(["idle power (counter, tick-aligned)",
                 f"{_f(None if r is None else r.get('power_w_counter'))} W",
                 not_run("idle") if r is None else "info", "-"])
    pl = res("power_limits")
    if pl is None:
        verdict = not_run("power_limits")
    elif pl.get("supported") is False:
        verdict = "not supported"
    elif pl.get("permitted") is False:
        verdict = "not permitted"
    else:
        verdict = _judge(bool(pl.get("restored")) and pl.get("enforced_as_requested") is not False)
    rows.append(["power limits set, enforced as requested and restored",
                 "-" if pl is None else
                 ", ".join(f"{_f(x.get('limit_w'))}->{_f(x.get('enforced_w'))} W"
                           for x in pl.get("limits", []) if "skipped" not in x) or "-",
                 verdict, "enforced = requested (+-1 W), original restored"])
    g = res("gemma_batch")
    if g is None:
        gv, fig = not_run("gemma_batch"), "-"
    else:
        frac = g.get("best_fraction_of_grid_best")
        fig = _f(frac, 3)
        if g.get("grid_cut"):
            gv = (f"not applicable: the grid was cut ({len(g['grid_cut'])} of "
                  f"{len(g['grid'])} batch sizes not run: {g['grid_cut']})")
        elif frac is None:
            gv = "not applicable: no complete trial to compare"
        else:
            gv = _judge(frac >= PASS_GRID_FRACTION)
    rows.append(["gemma_batch: optimiser best / grid best tokens/J", fig, gv,
                 f">= {PASS_GRID_FRACTION:g}"])
    if g is None:
        ev, efig = not_run("gemma_batch"), "-"
    else:
        to, grid_j = g.get("optimiser_energy_to_grid_best_j"), g.get("grid_energy_j")
        efig = f"{_f(to)} J vs {_f(grid_j)} J"
        if g.get("grid_cut"):
            ev = "not applicable: the grid was cut"
        elif grid_j is None:
            ev = "not applicable: no energy recorded for the grid"
        elif to is None:
            ev = "FAIL: the optimiser never reached the grid's best"
        else:
            ev = _judge(to < grid_j)
    rows.append(["gemma_batch: optimiser's energy to the grid's best vs the grid's energy",
                 efig, ev, f"less (trials + proposals, best within {PASS_GRID_FRACTION:g})"])
    n = res("nas_cnn")
    dev: list[str] = [] if n is None else list(n.get("devices_seen") or [])
    rows.append(["nas_cnn trials ran on the GPU", _f(", ".join(dev) if dev else None),
                 not_run("nas_cnn") if n is None else
                 ("not applicable: dry run (CPU)" if results.get("dry_run")
                  else _judge(bool(dev) and all(str(d).startswith("cuda") for d in dev))),
                 "every trial on cuda"])
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
    lines += ["## Checks", "", "| check | figure | verdict | pass line |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in verdicts(r)]
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
            lines += ["", "| window s | counter periods | meter source | flagged | median abs "
                      "error % | raw counter: zero reads | raw counter: median abs error % | "
                      "resolved |", "|---|---|---|---|---|---|---|---|"]
            for w in res.get("windows", []):
                if "skipped" in w:
                    lines.append(f"| {w['window_s']} | - | - | - | - | - | - | {w['skipped']} |")
                    continue
                lines.append(f"| {w['window_s']} | {_f(w.get('periods'), 3)} | "
                             f"{', '.join(w.get('meter_sources', []))} | "
                             f"{_f(w.get('meter_flagged'))} | "
                             f"{_f(w.get('median_abs_error_pct'), 3)} | "
                             f"{_f(w.get('raw_counter_zero_reads'))} | "
                             f"{_f(w.get('raw_counter_median_abs_error_pct'), 3)} | "
                             f"{_f(w.get('resolved'))} |")
        if name == "power_limits" and res.get("limits"):
            lines += ["", "| limit W | requested (read back) W | enforced W | energy J | seconds | "
                      "mean W | J per matmul | TFLOP/J |", "|---|---|---|---|---|---|---|---|"]
            for w in res["limits"]:
                lines.append(f"| {_f(w.get('limit_w'))} | {_f(w.get('requested_read_back_w'))} | "
                             f"{_f(w.get('enforced_w'))} | {_f(w.get('energy_j'))} | "
                             f"{_f(w.get('seconds'))} | {_f(w.get('power_w'))} | "
                             f"{_f(w.get('j_per_matmul'))} | {_f(w.get('tflop_per_j'))} |")
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
    lib = "amdsmi through Zeus" if ck.vendor == "amd" else "NVML"
    head = _common_module().run_header(ck.command, (ck.meter, not ck.dry,
                                     f"FAKE {lib} (dry run): no energy was measured" if ck.dry
                                     else f"{lib} energy counter and sampled power of the GPU "
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


def _detect_vendor() -> str:
    """``"nvidia"`` where NVML starts and lists a GPU, else ``"amd"`` where Zeus finds one."""
    from ecopt.meters.amd import AMDMeter
    from ecopt.meters.nvml import NVMLMeter

    if NVMLMeter.probe()[0]:
        return "nvidia"
    return "amd" if AMDMeter.probe()[0] else "nvidia"


@contextlib.contextmanager
def _dry_run_amd() -> Iterator[Any]:
    """The AMD dry run's stand-in: the tests' fake amdsmi under Zeus's real AMD layer."""
    import pytest
    from fake_amdsmi import FakeAmdGpu, installed_fake_amdsmi

    import ecopt.meters

    real = ecopt.meters.get_meter

    def get_meter(spec: Any = "auto", **options: Any) -> Any:
        if spec == "amd":  # a CPU trial declares no GPU: meter the fake one all the same
            options.setdefault("gpus", [0])
        return real(spec, **options)

    with pytest.MonkeyPatch.context() as mp:
        with installed_fake_amdsmi([FakeAmdGpu(name="Fake AMD GPU (dry run)", power_w=250,
                                               counter_period_s=0.02)], mp) as amd:
            ecopt.meters.get_meter = get_meter  # type: ignore[assignment]
            try:
                yield amd
            finally:
                ecopt.meters.get_meter = real  # type: ignore[assignment]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default=None,
                   help="results folder (summary.json, summary.md, studies); default "
                        "docs/gpu/<today> for a real run (where docs/gpu.md looks), "
                        "runs/gpu_check-dry-run for --dry-run")
    p.add_argument("--gpu", type=int, default=0,
                   help="nvidia-smi's index of the GPU to check (applied as CUDA_VISIBLE_DEVICES "
                        "with CUDA_DEVICE_ORDER=PCI_BUS_ID unless those are set already; with "
                        "CUDA_VISIBLE_DEVICES set, GPU 0 of it is checked)")
    p.add_argument("--vendor", choices=("auto", "nvidia", "amd"), default="auto",
                   help="the GPU's vendor: auto picks NVIDIA when NVML works, else AMD (Zeus and "
                        "amdsmi); the dry run fakes NVIDIA unless told amd")
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
    p.add_argument("--grid", default="1,8,64,512,4096,6144,8192,12288,16384,24576,32768",
                   help="gemma_batch's batch grid (real run), finer above 4,096 where the best sat")
    p.add_argument("--cifar10", default=None, metavar="DIR",
                   help="nas_cnn on CIFAR-10 python batches from DIR (default: digits)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.out is None:
        args.out = str(ROOT / "runs" / "gpu_check-dry-run" if args.dry_run else
                       ROOT / "docs" / "gpu" / _dt.date.today().isoformat())
    names = [n.strip() for n in args.sections.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTION_FUNCS]
    if unknown:
        raise SystemExit(f"--sections: unknown {unknown}; choose from {list(SECTION_FUNCS)}")
    if not args.budget_s > 0:
        raise SystemExit(f"--budget-s > 0 must hold, got {args.budget_s}")
    if not args.dry_run:
        # --gpu N is nvidia-smi's GPU N: nvidia-smi numbers GPUs by PCI bus, CUDA fastest first
        # unless told otherwise (and CUDA_VISIBLE_DEVICES indices follow CUDA's numbering).
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(args.gpu))
    if args.vendor == "auto":
        args.vendor = "nvidia" if args.dry_run else _detect_vendor()
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
        if ck.vendor == "amd":
            fake = _dry_run_amd()
        else:
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
