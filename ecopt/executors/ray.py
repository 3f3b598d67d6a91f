"""Trials on Ray: a local Ray that ecopt starts, or a running Ray cluster.

One trial is one Ray task asking ``num_cpus`` CPUs and ``num_gpus`` GPUs (with
``num_gpus=1`` Ray gives each trial its own GPU through
``CUDA_VISIBLE_DEVICES``, and the record names it). The task unpickles the
objective, runs the trial in the Ray worker, meters its phases there, and sends
the outcome back; the driver alone writes the trial log.

Faults:

* a worker process (or its node) that dies mid-trial: the trial is recorded
  failed (``WorkerLost``, re-proposable) and the study goes on; tasks run with
  ``max_retries=0``, so Ray never re-runs a trial that crashed its worker;
* a trial past ``trial_timeout_s``: recorded failed (``TrialTimeout``); its task
  is force-cancelled (Ray stops its worker process), so its CPUs/GPU come back;
* Ray going away (``ray.shutdown()``, the head node died):
  :class:`~ecopt.executors.ExecutorLostError`; the study records the trials in
  flight as interrupted and stops, log intact;
* workers whose Python cannot import ecopt (a cluster where it is not
  installed): :class:`~ecopt.executors.ExecutorLostError` at the first trial,
  saying what to install where.

Example:
    >>> from ecopt.executors import RayExecutor
    >>> with RayExecutor("ray://head:10001", num_gpus=1, trial_timeout_s=3600) as ex:
    ...     study.optimize(objective, n_trials=64, executor=ex)
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ecopt.errors import RayUnavailableError
from ecopt.executors._shared import interrupt_jobs, unpicklable_result, unpickle_failure
from ecopt.executors.base import (
    TRIAL_TIMEOUT,
    WORKER_LOST,
    Executor,
    ExecutorLostError,
    SlotsCache,
    check_picklable,
    driver_python_path,
    execute_trial,
    fault_outcome,
)
from ecopt.trial import Trial, TrialOutcome

__all__ = ["RayExecutor", "RayUnavailableError", "import_ray", "init_ray"]

log = logging.getLogger("ecopt")

_INSTALL_HINT = "pip install 'ecopt[ray]' (or: pip install 'ray[tune]')"

# amdsmi (pulled in by zeus, for one) installed on a machine without ROCm raises
# KeyError on import; Ray imports it in every process it starts and catches only
# ImportError, so `import ray` fails there. Ray's processes that ecopt starts get a
# stand-in that raises ImportError instead (Ray then sees no AMD GPU, as is true).
_AMDSMI_STANDIN = ('raise ImportError("amdsmi is installed but its ROCm library '
                   '(libamd_smi.so) cannot be loaded; ecopt hides it from Ray")\n')
_amdsmi_hidden = False


def _hide_unloadable_amdsmi() -> bool:
    """Make ``import amdsmi`` raise ImportError in this process when it cannot load here."""
    global _amdsmi_hidden
    if _amdsmi_hidden:
        return True
    if "amdsmi" in sys.modules or importlib.util.find_spec("amdsmi") is None:
        return False
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints its failure
            import amdsmi  # noqa: F401
    except ImportError:
        return False
    except Exception:  # KeyError / OSError: the package without its library
        sys.modules["amdsmi"] = None  # type: ignore[assignment]
        _amdsmi_hidden = True
    return _amdsmi_hidden


def import_ray() -> Any:
    """The ``ray`` module (imported on first use).

    Raises:
        RayUnavailableError: ray is not installed.
    """
    _hide_unloadable_amdsmi()
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(f"Ray support needs ray: {_INSTALL_HINT}") from None
    return ray


_started_here: dict[str, Any] = {}


def init_ray(address: str | None = None, *, num_cpus: int | None = None,
             num_gpus: int | None = None) -> bool:
    """Connect this process to Ray, unless it already is.

    Args:
        address: ``None``: start a local Ray on this host (no dashboard); its
            workers run this interpreter (``sys.executable``) with this
            process's import path. Else a cluster address (``"auto"``,
            ``"ray://head:10001"``, ``"head:6379"``).
        num_cpus: CPUs a local Ray offers (default: ``min(cpu_count, 4)``).
        num_gpus: GPUs a local Ray offers (default: the ones Ray detects).

    Returns:
        True when this call started or connected Ray (then
        :func:`shutdown_ray` is the caller's to call); False when Ray was
        already initialised here (it is left as it is).

    Raises:
        RayUnavailableError: ray is missing, or the cluster cannot be reached.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
    saved = os.environ.get("PYTHONPATH")
    try:
        if address is None:
            kw.update(num_cpus=num_cpus or min(os.cpu_count() or 1, 4), num_gpus=num_gpus)
            # Ray's processes inherit this environment: the driver's import path, and
            # the amdsmi stand-in where amdsmi cannot load.
            paths = [driver_python_path()]
            if _amdsmi_hidden:
                standin = tempfile.mkdtemp(prefix="ecopt-ray-")
                os.makedirs(os.path.join(standin, "amdsmi"))
                with open(os.path.join(standin, "amdsmi", "__init__.py"), "w") as fh:
                    fh.write(_AMDSMI_STANDIN)
                _started_here["standin"] = standin
                paths.insert(0, standin)
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        else:
            kw["address"] = address
        ray.init(**kw)
    except Exception as exc:
        _remove_standin()
        where = f"at {address!r}" if address else "locally"
        raise RayUnavailableError(f"could not start or reach Ray {where} ({type(exc).__name__}: "
                                  f"{exc}); {_INSTALL_HINT}") from None
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return True


def _remove_standin() -> None:
    standin = _started_here.pop("standin", None)
    if standin:
        shutil.rmtree(standin, ignore_errors=True)


def shutdown_ray() -> None:
    """Stop the Ray that :func:`init_ray` started (and remove what it left in /tmp)."""
    import_ray().shutdown()
    _remove_standin()


def _worker_label() -> str:
    import ray

    try:
        node = ray.get_runtime_context().get_node_id()[:8]
    except Exception:  # pragma: no cover - not in a Ray worker
        return f"pid:{os.getpid()}"
    return f"ray node {node} (pid:{os.getpid()})"


def _run_in_task(payload: bytes, meter: str | None) -> TrialOutcome:
    """The Ray task: unpickle (objective, trial), run it here, return the outcome."""
    from ray import cloudpickle

    label = _worker_label()
    try:
        objective, trial = cloudpickle.loads(payload)
    except Exception as exc:  # the objective's module is not importable on this worker
        return unpickle_failure(
            exc, "the Ray worker's Python",
            "define the objective in a module the workers can import (install it on every "
            "node, or ship it with runtime_env={'py_modules': [...]} or 'working_dir')",
            worker=label)
    out = execute_trial(objective, trial, worker=label,
                        device=os.environ.get("CUDA_VISIBLE_DEVICES", ""), meter=meter)
    try:
        cloudpickle.dumps(out)
    except Exception as exc:
        out = unpicklable_result(out, exc)
    return out


@dataclass
class _Job:
    key: str
    trial: Trial
    ref: Any
    future: Future[TrialOutcome]
    submitted: float = field(default_factory=time.monotonic)
    timed_out: bool = False


class RayExecutor(Executor):
    """Run trials as Ray tasks.

    Args:
        address: ``None`` (default): the Ray already initialised in this
            process, else a local Ray that this executor starts (and stops on
            :meth:`close`). Or a cluster address: ``"auto"``,
            ``"ray://head:10001"``, ``"head:6379"``.
        num_cpus: CPUs each trial asks of Ray.
        num_gpus: GPUs each trial asks (``1``: one GPU per trial, each trial
            sees only its own through ``CUDA_VISIBLE_DEVICES``).
        local_cpus: CPUs of a local Ray this executor starts (default
            ``min(cpu_count, 4)``).
        local_gpus: GPUs of a local Ray this executor starts (default: the
            ones Ray detects).
        runtime_env: Ray's ``runtime_env`` for the trial tasks (``pip``,
            ``py_modules``, ``env_vars``, ``py_executable``...).
        trial_timeout_s: Record a trial failed (``TrialTimeout``) this many
            seconds after it was submitted, and stop its worker process. The
            study keeps no more trials in flight than Ray has room for, so a
            trial starts when it is submitted (plus a worker's start-up).
        worker_meter: A meter name (``"auto"``, ``"nvml"``...) built in each
            Ray worker instead of the study's meter, which was chosen on the
            driver.
        poll_interval_s: How often the driver checks timeouts and that Ray is up.

    Raises:
        ValueError: for bad arguments.
        RayUnavailableError: when ray is missing or the cluster cannot be reached.
    """

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: float = 1, num_gpus: float = 0,
                 local_cpus: int | None = None, local_gpus: int | None = None,
                 runtime_env: Mapping[str, Any] | None = None,
                 trial_timeout_s: float | None = None, worker_meter: str | None = None,
                 poll_interval_s: float = 0.5) -> None:
        if address is not None and (not isinstance(address, str) or not address):
            raise ValueError(f"address must be a Ray address like 'ray://head:10001' or 'auto', "
                             f"got {address!r}")
        if not num_cpus >= 0 or not num_gpus >= 0 or num_cpus + num_gpus <= 0:
            raise ValueError(f"num_cpus >= 0 and num_gpus >= 0, not both 0, must hold, got "
                             f"num_cpus={num_cpus!r}, num_gpus={num_gpus!r}")
        for name_, v in (("local_cpus", local_cpus), ("local_gpus", local_gpus)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"{name_} >= 0 must hold, got {name_}={v!r}")
        if (local_cpus is not None or local_gpus is not None) and address is not None:
            raise ValueError("local_cpus= and local_gpus= size a local Ray; with address= the "
                             "cluster decides what it offers")
        if trial_timeout_s is not None and not trial_timeout_s > 0:
            raise ValueError(f"trial_timeout_s > 0 must hold, got {trial_timeout_s!r}")
        if poll_interval_s <= 0:
            raise ValueError(f"poll_interval_s > 0 must hold, got {poll_interval_s!r}")
        ray = import_ray()
        self.num_cpus, self.num_gpus = float(num_cpus), float(num_gpus)
        self.trial_timeout_s = trial_timeout_s
        self.worker_meter = worker_meter
        self.poll_interval_s = poll_interval_s
        self._owns_ray = init_ray(address, num_cpus=local_cpus, num_gpus=local_gpus)
        self.embedded = self._owns_ray and address is None
        self.ray_version = ray.__version__
        opts: dict[str, Any] = {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_retries": 0}
        if runtime_env:
            opts["runtime_env"] = dict(runtime_env)
        self._task = ray.remote(**opts)(_run_in_task)
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._lost = False
        self._slots = SlotsCache(self._capacity)
        try:
            self.address = str(ray.get_runtime_context().gcs_address)
        except Exception:
            self.address = address or "local"
        if self._capacity() == 0:
            log.warning("the Ray cluster at %s offers no room yet for a trial asking %s; trials "
                        "wait until a node that has it joins", self.address,
                        self._needs())
        self._watcher = threading.Thread(target=self._watch, name="ecopt-ray-watch", daemon=True)
        self._watcher.start()

    # -- facts ---------------------------------------------------------------------------
    def _needs(self) -> dict[str, float]:
        return {k: v for k, v in (("CPU", self.num_cpus), ("GPU", self.num_gpus)) if v > 0}

    def _capacity(self) -> int:
        have = import_ray().cluster_resources()
        return min(int(math.floor(float(have.get(k, 0)) / v + 1e-9))
                   for k, v in self._needs().items())

    def _alive(self) -> bool:
        return not self._closed and not self._lost and import_ray().is_initialized()

    @property
    def slots(self) -> int:  # type: ignore[override]
        """Trials Ray can run at once now (refreshed every 2 s; at least 1)."""
        return self._slots.get(self._alive())

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "embedded": self.embedded,
                "slots": self.slots, "num_cpus": self.num_cpus, "num_gpus": self.num_gpus,
                "ray_version": self.ray_version, "trial_timeout_s": self.trial_timeout_s,
                "worker_meter": self.worker_meter}

    # -- running trials ------------------------------------------------------------------
    def check_objective(self, objective: Callable[[Trial], Any]) -> None:
        from ray import cloudpickle

        check_picklable(objective, cloudpickle.dumps, "Ray workers")

    def _lost_error(self) -> ExecutorLostError:
        return ExecutorLostError(f"the Ray cluster at {self.address} went away (ray is no longer "
                                 "initialised in this process, or its head node stopped)")

    def _no_ecopt_error(self, exc: BaseException) -> ExecutorLostError:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return ExecutorLostError(
            f"the Ray workers of {self.address} cannot import ecopt ({first[:200]}): their "
            "Python must have ecopt installed. Install it on every node (pip install "
            "'ecopt[ray]' in the Python the Ray workers run, with your objective's own "
            "packages), or give the trials a Python that has it: RayExecutor(runtime_env="
            "{'pip': ['ecopt[ray]']}) or runtime_env={'py_executable': '/path/to/python'}")

    def submit(self, objective: Callable[[Trial], Any], trial: Trial) -> Future[TrialOutcome]:
        if self._closed:
            raise RuntimeError("this RayExecutor is closed")
        if not self._alive():
            self._lost = True
            raise self._lost_error()
        from ray import cloudpickle

        payload = cloudpickle.dumps((objective, trial))
        key = f"ecopt-trial-{trial.number}-{uuid.uuid4().hex[:12]}"
        fut: Future[TrialOutcome] = Future()
        fut.set_running_or_notify_cancel()
        ref = self._task.options(name=f"ecopt-trial-{trial.number}").remote(
            payload, self.worker_meter)
        job = _Job(key, trial, ref, fut)
        with self._lock:
            self._jobs[key] = job
        ref.future().add_done_callback(lambda f, job=job: self._on_done(job, f))
        return fut

    def _on_done(self, job: _Job, done: Future[TrialOutcome]) -> None:
        """Runs in a Ray thread when a trial's task ends."""
        with self._lock:
            self._jobs.pop(job.key, None)
        # An ObjectRef released after ray.shutdown() ends the process (Ray's core worker
        # is gone): none is kept past its task.
        job.ref = None
        if job.future.done():
            return
        try:
            out = done.result()
        except BaseException as exc:  # noqa: BLE001 - every failure resolves the future
            self._resolve_failure(job, exc)
            return
        if out.number == -1:  # the task could not unpickle the trial
            out = TrialOutcome.of(job.trial, error=out.error, host=out.host, worker=out.worker)
        job.future.set_result(out)

    def _resolve_failure(self, job: _Job, exc: BaseException) -> None:
        from ray import exceptions as rex

        text = str(exc)
        duration_s = time.monotonic() - job.submitted
        if job.timed_out or job.future.done():
            return  # the watcher resolved it
        if self._closed:
            job.future.set_result(fault_outcome(
                job.trial, "Interrupted", "the executor was closed while the trial ran"))
        elif "No module named 'ecopt" in text:
            job.future.set_exception(self._no_ecopt_error(exc))
        elif isinstance(exc, (rex.WorkerCrashedError, rex.NodeDiedError, rex.OutOfMemoryError)):
            reason = type(exc).__name__
            job.future.set_result(fault_outcome(
                job.trial, WORKER_LOST,
                f"the Ray worker running trial {job.trial.number} died ({reason}); the trial "
                "is recorded failed and may be proposed again, the study goes on",
                duration_s=duration_s))
        elif isinstance(exc, (rex.LocalRayletDiedError, rex.RaySystemError)) or \
                not import_ray().is_initialized():
            self._lost = True
            job.future.set_exception(self._lost_error())
        elif isinstance(exc, rex.TaskCancelledError):
            job.future.set_result(fault_outcome(
                job.trial, "Interrupted", f"the Ray task of trial {job.trial.number} was "
                "cancelled outside ecopt"))
        else:
            job.future.set_exception(exc if isinstance(exc, Exception)
                                     else RuntimeError(f"{type(exc).__name__}: {exc}"))

    def _watch(self) -> None:
        """Time out trials past ``trial_timeout_s``; notice when Ray goes away."""
        while not self._closed:
            time.sleep(self.poll_interval_s)
            with self._lock:
                jobs = list(self._jobs.values())
            if not jobs or self._closed:
                continue
            if not import_ray().is_initialized():
                self._lost = True
                for job in jobs:
                    with self._lock:
                        self._jobs.pop(job.key, None)
                    if not job.future.done():
                        job.future.set_exception(self._lost_error())
                continue
            if self.trial_timeout_s is None:
                continue
            now = time.monotonic()
            for job in jobs:
                if self._closed:
                    break
                if job.timed_out or now - job.submitted <= self.trial_timeout_s:
                    continue
                job.timed_out = True
                with self._lock:
                    self._jobs.pop(job.key, None)
                try:
                    if job.ref is not None:
                        import_ray().cancel(job.ref, force=True)  # stops its worker process
                except Exception as exc:
                    log.warning("could not cancel the Ray task of trial %s: %s",
                                job.trial.number, exc)
                if not job.future.done():
                    job.future.set_result(fault_outcome(
                        job.trial, TRIAL_TIMEOUT,
                        f"trial {job.trial.number} ran longer than trial_timeout_s="
                        f"{self.trial_timeout_s:g} s on Ray ({self.address}); its task was "
                        "cancelled and its worker process stopped, the study goes on",
                        duration_s=now - job.submitted))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = import_ray()

        def cancel(job: _Job) -> None:
            try:
                if job.ref is not None:
                    ray.cancel(job.ref, force=True)
            finally:
                job.ref = None

        interrupt_jobs(self._lock, self._jobs, cancel)
        if self._watcher is not threading.current_thread():
            self._watcher.join(timeout=2 * self.poll_interval_s + 1)
        if self._owns_ray:
            try:
                shutdown_ray()
            except Exception:
                pass
