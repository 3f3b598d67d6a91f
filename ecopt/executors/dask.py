"""Trials on a Dask cluster: an embedded ``LocalCluster`` or an existing scheduler.

One trial is one Dask task. With ``resources={"GPU": 1}`` each trial takes one
GPU slot of a worker; each worker process owns one GPU through its
``CUDA_VISIBLE_DEVICES`` (set by this executor for its embedded cluster, or by
you when you start ``dask worker``), so a trial's NVML window covers its own
GPU only and the record says which device it used.

Faults:

* a worker that dies mid-trial: the trial is recorded failed (``WorkerLost``,
  re-proposable); the study goes on with the other workers (the embedded
  cluster's scheduler never retries a trial on another worker; on your own
  cluster set ``distributed.scheduler.allowed-failures: 0`` for the same);
* a trial past ``trial_timeout_s``: recorded failed (``TrialTimeout``), its
  task is cancelled and its worker restarted through its nanny, so a hung
  trial does not hold a worker;
* the scheduler going away: :class:`~ecopt.executors.ExecutorLostError`; the
  study records the trials in flight as interrupted and stops, log intact.

Example:
    >>> ex = ecopt.DaskExecutor("tls://scheduler:8786", security=sec, resources={"GPU": 1})
    >>> study.optimize(objective, n_trials=64, executor=ex)
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ecopt.errors import DaskUnavailableError
from ecopt.executors._shared import interrupt_jobs
from ecopt.executors.base import (
    TRIAL_TIMEOUT,
    WORKER_LOST,
    Executor,
    ExecutorLostError,
    SlotsCache,
    check_picklable,
    execute_trial,
    fault_outcome,
)
from ecopt.trial import Trial, TrialOutcome

__all__ = ["DaskExecutor", "DaskUnavailableError"]

log = logging.getLogger("ecopt")

_INSTALL_HINT = "pip install 'ecopt[distributed]' (or: pip install 'dask[distributed]')"


def _run_on_worker(objective: Callable[[Trial], Any], trial: Trial,
                   meter: str | None = None) -> TrialOutcome:
    """The Dask task: run one trial on the worker that got it."""
    label = ""
    try:
        from distributed import get_worker

        w = get_worker()
        label = str(w.address) if str(w.name) == str(w.address) else f"{w.name} ({w.address})"
    except Exception:  # pragma: no cover - not on a worker (e.g. a test calling it directly)
        label = f"pid:{os.getpid()}"
    return execute_trial(objective, trial, worker=label,
                         device=os.environ.get("CUDA_VISIBLE_DEVICES", ""), meter=meter)


async def _exit_worker() -> None:
    """Run on a worker's event loop: end its process now (a hung trial thread cannot be stopped)."""
    os._exit(1)


@dataclass
class _Job:
    trial: Trial
    dfut: Any
    future: Future[TrialOutcome]
    worker: str = ""
    seen_running: float | None = None


class DaskExecutor(Executor):
    """Run trials on Dask distributed.

    Args:
        address: ``None`` (default): start an embedded ``LocalCluster`` bound to
            127.0.0.1 with no dashboard. A scheduler address
            (``"tcp://host:8786"``, ``"tls://host:8786"``): connect to a running
            cluster (``dask scheduler`` + ``dask worker``, dask-jobqueue,
            Kubernetes, SSH...).
        client: A ``distributed.Client`` you created (any deployment); used
            as is and not closed by this executor.
        security: A ``distributed.Security`` (TLS certificates) for the
            connection, or ``True`` for an embedded cluster with temporary
            self-signed TLS credentials.
        n_workers: Worker processes of the embedded cluster (default: one per
            entry of ``gpus``, else ``min(cpu_count, 4)``).
        threads_per_worker: Threads per embedded worker (default 1: one trial
            per process, so per-process CPU-time estimates stay per trial).
        resources: What one trial needs, e.g. ``{"GPU": 1}`` (Dask worker
            resources). Embedded workers each offer this much.
        gpus: GPU ids for the embedded cluster: worker ``i`` runs with
            ``CUDA_VISIBLE_DEVICES=gpus[i]`` (default: none set).
        trial_timeout_s: Record a trial failed (``TrialTimeout``) after this
            many seconds on a worker, cancel it and restart its worker.
        memory_limit: Memory per embedded worker (Dask's format, default "auto").
        connect_timeout_s: How long to wait for a scheduler (and for it to come
            back after a dropped connection).
        poll_interval_s: How often the driver asks the scheduler where trials
            run (for timeouts and for naming the worker of a lost trial).
        worker_meter: A meter name (``"auto"``, ``"nvml"``...) built on each
            worker instead of using the study's meter, which was chosen on the
            driver (e.g. ``"auto"`` on a driver without GPU picks the estimate).

    Raises:
        ValueError: for bad arguments (both ``address`` and ``client``...).
        DaskUnavailableError: when distributed is missing or the scheduler
            cannot be reached.
    """

    name = "dask"

    def __init__(self, address: str | None = None, *, client: Any = None, security: Any = None,
                 n_workers: int | None = None, threads_per_worker: int = 1,
                 resources: Mapping[str, float] | None = None,
                 gpus: Sequence[int | str] | None = None, trial_timeout_s: float | None = None,
                 memory_limit: str | float | None = "auto", connect_timeout_s: float = 30.0,
                 poll_interval_s: float = 0.5, worker_meter: str | None = None) -> None:
        if address is not None and client is not None:
            raise ValueError("pass either address= or client=, not both")
        if address is not None and (not isinstance(address, str) or not address):
            raise ValueError(f"address must be a scheduler address like 'tcp://host:8786', "
                             f"got {address!r}")
        if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, int)
                                      or n_workers < 1):
            raise ValueError(f"n_workers >= 1 must hold, got n_workers={n_workers!r}")
        if threads_per_worker < 1:
            raise ValueError(f"threads_per_worker >= 1 must hold, got {threads_per_worker}")
        if trial_timeout_s is not None and not trial_timeout_s > 0:
            raise ValueError(f"trial_timeout_s > 0 must hold, got {trial_timeout_s!r}")
        if resources is not None:
            for k, v in resources.items():
                if not isinstance(k, str) or not v > 0:
                    raise ValueError(f"resources must map names to amounts > 0, got {k!r}: {v!r}")
        embedded = address is None and client is None
        if gpus is not None:
            if not embedded:
                raise ValueError("gpus= places the embedded cluster's workers; on your own cluster "
                                 "start each worker with CUDA_VISIBLE_DEVICES=<id> instead")
            gpus = [str(g) for g in gpus]
            if not gpus:
                raise ValueError("gpus must name at least one GPU id")
            if n_workers is not None and n_workers != len(gpus):
                raise ValueError(f"n_workers={n_workers} must equal len(gpus)={len(gpus)} "
                                 "(one worker per GPU)")
        try:
            import distributed
        except ImportError:
            raise DaskUnavailableError(f"DaskExecutor needs dask distributed: {_INSTALL_HINT}") \
                from None

        self.resources = dict(resources) if resources else None
        self.worker_meter = worker_meter
        self.trial_timeout_s = trial_timeout_s
        self.poll_interval_s = poll_interval_s
        self.embedded = embedded
        self._cluster: Any = None
        self._owns_client = client is None
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._slots = SlotsCache(self._capacity)

        if client is not None:
            self._client = client
        elif address is not None:
            try:
                self._client = distributed.Client(address, security=security,
                                                  timeout=connect_timeout_s, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise DaskUnavailableError(
                    f"could not reach the Dask scheduler at {address!r} within "
                    f"{connect_timeout_s:g} s ({exc}); start one with `dask scheduler` and workers "
                    f"with `dask worker {address}`, or check the address and TLS settings"
                ) from None
        else:
            n = n_workers or (len(gpus) if gpus else min(os.cpu_count() or 1, 4))
            kw: dict[str, Any] = dict(
                threads_per_worker=threads_per_worker, processes=True, host="127.0.0.1",
                dashboard_address=None, memory_limit=memory_limit,
                silence_logs=logging.ERROR,
                # A trial whose worker dies is recorded failed, never re-run elsewhere
                # (a trial that crashes its worker would otherwise take down the next ones).
                scheduler_kwargs={"allowed_failures": 0,
                                  # Dask's HTTP endpoints on loopback, on a free port.
                                  "dashboard_address": "127.0.0.1:0"},
            )
            if security:
                kw.update(security=security, protocol="tls://")
            if self.resources:
                kw["resources"] = dict(self.resources)
            self._cluster = distributed.LocalCluster(n_workers=0 if gpus else n, **kw)
            if gpus:
                base = self._cluster.new_spec
                for g in gpus:
                    opts = dict(base["options"])
                    opts["env"] = {**opts.get("env", {}), "CUDA_VISIBLE_DEVICES": g}
                    self._cluster.worker_spec[f"gpu-{g}"] = {"cls": base["cls"], "options": opts}
                self._cluster.scale(len(gpus))
            self._client = distributed.Client(self._cluster, set_as_default=False)
            try:
                self._client.wait_for_workers(n, timeout=max(connect_timeout_s, 60))
            except Exception as exc:
                self.close()
                raise DaskUnavailableError(f"the embedded Dask cluster did not start {n} "
                                           f"workers: {exc}") from None
        self.address = str(self._client.scheduler.address)
        self._check_cluster()
        self._watcher = threading.Thread(target=self._watch, name="ecopt-dask-watch", daemon=True)
        self._watcher.start()

    # -- facts ---------------------------------------------------------------------
    def _check_cluster(self) -> None:
        if self.embedded:
            return
        try:
            allowed = self._client.run_on_scheduler(
                lambda dask_scheduler: dask_scheduler.allowed_failures)
        except Exception:
            allowed = None
        if allowed:
            log.warning(
                "the Dask scheduler at %s re-runs a task whose worker died up to %s more times; "
                "a trial that crashes its worker would then be re-run elsewhere. Start the "
                "scheduler with DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0 so such trials "
                "are recorded failed (WorkerLost) instead", self.address, allowed)
        if self.resources and self._capacity() == 0:
            log.warning("no worker of %s offers resources %s yet; trials wait until one joins "
                        "(start workers with `dask worker %s --resources %s`)", self.address,
                        self.resources, self.address,
                        ",".join(f"{k}={v:g}" for k, v in self.resources.items()))

    def _capacity(self) -> int:
        info = self._client.scheduler_info(n_workers=-1)
        total = 0
        for w in info.get("workers", {}).values():
            cap = int(w.get("nthreads", 1))
            for k, need in (self.resources or {}).items():
                cap = min(cap, int(math.floor(float(w.get("resources", {}).get(k, 0)) / need)))
            total += max(cap, 0)
        return total

    @property
    def slots(self) -> int:  # type: ignore[override]
        """Trials the cluster can run at once now (refreshed every 2 s; at least 1)."""
        return self._slots.get(self._client.status == "running")

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` in use (e.g. for its dashboard link)."""
        return self._client

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "embedded": self.embedded,
                "slots": self.slots, "resources": self.resources,
                "trial_timeout_s": self.trial_timeout_s, "worker_meter": self.worker_meter}

    # -- running trials -------------------------------------------------------------------
    def check_objective(self, objective: Callable[[Trial], Any]) -> None:
        from distributed.protocol.pickle import dumps

        check_picklable(objective, dumps, "Dask workers")

    def _lost_error(self) -> ExecutorLostError:
        return ExecutorLostError(f"the Dask scheduler at {self.address} went away "
                                 f"(client status: {self._client.status})")

    def submit(self, objective: Callable[[Trial], Any], trial: Trial) -> Future[TrialOutcome]:
        if self._closed:
            raise RuntimeError("this DaskExecutor is closed")
        if self._client.status != "running":
            raise self._lost_error()
        key = f"ecopt-trial-{trial.number}-{uuid.uuid4().hex[:12]}"
        fut: Future[TrialOutcome] = Future()
        fut.set_running_or_notify_cancel()
        dfut = self._client.submit(_run_on_worker, objective, trial, self.worker_meter, key=key,
                                   pure=False, resources=self.resources)
        with self._lock:
            self._jobs[key] = _Job(trial, dfut, fut)
        dfut.add_done_callback(self._on_done)
        return fut

    def _on_done(self, dfut: Any) -> None:
        """Runs in a Dask client thread when a trial's task ends."""
        with self._lock:
            job = self._jobs.pop(dfut.key, None)
        if job is None or job.future.done():
            return
        status = dfut.status
        try:
            if status == "finished":
                job.future.set_result(dfut.result())
            elif status == "error":
                exc = dfut.exception()
                from distributed import KilledWorker

                if isinstance(exc, KilledWorker):
                    addr = getattr(exc.last_worker, "address", "") or job.worker
                    job.future.set_result(fault_outcome(
                        job.trial, WORKER_LOST,
                        f"the Dask worker {addr} died while running trial {job.trial.number}; "
                        "the trial is recorded failed and may be proposed again, the study "
                        "goes on with the other workers", host=_host_of(addr), worker=addr))
                else:
                    job.future.set_exception(exc)
            elif self._client.status != "running" or self._closed:
                job.future.set_exception(self._lost_error())
            else:  # cancelled by someone else (client.restart(), another client...)
                job.future.set_result(fault_outcome(
                    job.trial, "Interrupted", f"the Dask task of trial {job.trial.number} was "
                    "cancelled outside ecopt", worker=job.worker, host=_host_of(job.worker)))
        except Exception as exc:  # e.g. the result could not be fetched: scheduler gone
            if not job.future.done():
                job.future.set_exception(self._lost_error() if self._client.status != "running"
                                         else exc)

    def _watch(self) -> None:
        """Note where trials run; time out the ones past ``trial_timeout_s``."""
        while not self._closed:
            time.sleep(self.poll_interval_s)
            with self._lock:
                if not self._jobs:
                    continue
            if self._client.status != "running":
                continue
            try:
                processing = self._client.processing()
            except Exception:
                continue
            now = time.monotonic()
            expired: list[tuple[_Job, str]] = []
            with self._lock:
                for addr, keys in processing.items():
                    for key in keys:
                        job = self._jobs.get(key)
                        if job is not None and job.seen_running is None:
                            job.worker, job.seen_running = str(addr), now
                if self.trial_timeout_s is not None:
                    for key, job in list(self._jobs.items()):
                        if job.seen_running is not None and \
                                now - job.seen_running > self.trial_timeout_s:
                            del self._jobs[key]
                            expired.append((job, job.worker))
            for job, addr in expired:
                self._time_out(job, addr)

    def _time_out(self, job: _Job, addr: str) -> None:
        duration_s = time.monotonic() - (job.seen_running or time.monotonic())
        try:
            self._client.cancel(job.dfut, force=True)
        except Exception:
            pass
        # A thread cannot be stopped: the worker process is restarted so its slot comes
        # back. The outcome is reported only after that, so the study's next trial cannot
        # land on the worker being restarted.
        threading.Thread(target=self._restart_then_report, args=(job, addr, duration_s),
                         daemon=True).start()

    def _restart_then_report(self, job: _Job, addr: str, duration_s: float) -> None:
        if addr:
            self._restart_worker(addr)
        job.future.set_result(fault_outcome(
            job.trial, TRIAL_TIMEOUT,
            f"trial {job.trial.number} ran longer than trial_timeout_s={self.trial_timeout_s:g} s "
            f"on Dask worker {addr}; its task was cancelled and the worker process stopped (its nanny starts a new one), the study "
            "goes on", host=_host_of(addr), worker=addr, duration_s=duration_s))

    def _restart_worker(self, addr: str) -> None:
        """Stop a worker's process; its nanny (if any) starts a fresh one."""
        try:
            self._client.run(_exit_worker, workers=[addr], wait=False)
        except Exception as exc:
            log.warning("could not stop the hung Dask worker %s: %s", addr, exc)
            return
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not self._closed:
            try:
                if addr not in self._client.scheduler_info(n_workers=-1).get("workers", {}):
                    return
            except Exception:
                return
            time.sleep(0.05)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        interrupt_jobs(self._lock, self._jobs, lambda job: job.dfut.cancel(),
                       lambda job: (job.worker, _host_of(job.worker)))
        quiet = logging.getLogger("distributed.client")
        old_level = quiet.level
        if self._client.status != "running":  # its reconnect loop logs a traceback when stopped
            quiet.setLevel(logging.CRITICAL)
        try:
            if self._owns_client:
                self._client.close(timeout=10)
        except Exception:
            pass
        finally:
            quiet.setLevel(old_level)
        if self._cluster is not None:
            # Our own embedded cluster, every job already resolved: what its scheduler says
            # while its workers are torn down ("... workers died while trying to run it")
            # is about the teardown, not the study, so it is not shown as an ERROR.
            loggers = [logging.getLogger(n) for n in ("distributed.scheduler",
                                                      "distributed.nanny", "distributed.worker")]
            levels = [lg.level for lg in loggers]
            for lg in loggers:
                lg.setLevel(logging.CRITICAL)
            try:
                self._cluster.close(timeout=20)
            except Exception:
                pass
            finally:
                for lg, lvl in zip(loggers, levels):
                    lg.setLevel(lvl)


def _host_of(addr: str) -> str:
    """The host part of ``tcp://host:port`` (the driver's name for a loopback address)."""
    if not addr:
        return ""
    hostport = addr.split("://", 1)[-1].split(" (")[-1].rstrip(")")
    host = hostport.rsplit(":", 1)[0].strip("[]")
    if host in ("127.0.0.1", "localhost", "::1"):
        return socket.gethostname()
    return host
