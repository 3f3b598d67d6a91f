"""Trials on Apache Spark: an embedded ``local-cluster`` or any Spark master.

One trial is one Spark job of one task (barrier-free), so the cluster runs
as many trials at once as it has task slots. The task unpickles the
objective, runs the trial in the executor's Python worker, meters its phases
there with the executor host's meter, and sends the outcome back; the driver
alone writes the trial log.

Faults:

* an executor JVM or its Python worker that dies mid-trial: the trial is
  recorded failed (``WorkerLost``, re-proposable) and the study goes on with
  the other executors (Spark's standalone worker starts a replacement). The
  executor sets ``spark.task.maxFailures=1`` on the contexts it creates, so
  Spark never re-runs a trial that crashed its worker on another one; on a
  context you pass set the same;
* a trial past ``trial_timeout_s``: recorded failed (``TrialTimeout``); its job
  group is cancelled with interruption, so Spark kills its Python worker and
  the slot comes back;
* the Spark driver JVM or its SparkContext going away (the master removed the
  application, the JVM was killed): :class:`~ecopt.executors.ExecutorLostError`;
  the study records the trials in flight as interrupted and stops, log intact.

Example:
    >>> from ecopt.executors import SparkExecutor
    >>> with SparkExecutor(master="spark://head:7077", trial_timeout_s=3600) as ex:
    ...     study.optimize(objective, n_trials=64, executor=ex)
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ecopt.errors import SparkUnavailableError
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

__all__ = ["SparkExecutor", "SparkUnavailableError"]

log = logging.getLogger("ecopt")

_INSTALL_HINT = "pip install 'ecopt[spark]' (or: pip install pyspark) and a Java 17+ runtime"

#: Spark's words for a task whose executor JVM or Python worker died.
_LOST_PATTERNS = ("ExecutorLostFailure", "Python worker exited unexpectedly", "worker crashed",
                  "Executor heartbeat timed out", "Remote RPC client disassociated")
#: Spark's words for a job that ended because its SparkContext stopped.
_CONTEXT_GONE_PATTERNS = ("SparkContext was shut down", "cancelled because SparkContext",
                          "Cannot call methods on a stopped SparkContext")


def _executor_label() -> str:
    """This Python worker's executor, as ``executor <id> (pid:<pid>)`` where Spark says the id."""
    pid = os.getpid()
    url = os.environ.get("SPARK_LOG_URL_STDERR", "")
    m = re.search(r"executorId=([^&]+)", url)
    return f"executor {m.group(1)} (pid:{pid})" if m else f"pid:{pid}"


def _run_in_task(payload: bytes, meter: str | None) -> bytes:
    """The Spark task: unpickle (objective, trial), run it here, pickle the outcome back."""
    from pyspark.serializers import CloudPickleSerializer

    ser = CloudPickleSerializer()
    label = _executor_label()
    try:
        objective, trial = ser.loads(payload)
    except Exception as exc:  # the objective's module is not importable on this executor
        return ser.dumps(unpickle_failure(
            exc, "the Spark executor's Python",
            "define the objective in a module the executors can import (ship it with "
            "spark.submit.pyFiles or install it on every node)", worker=label))
    out = execute_trial(objective, trial, worker=label,
                        device=os.environ.get("CUDA_VISIBLE_DEVICES", ""), meter=meter)
    try:
        return ser.dumps(out)
    except Exception as exc:
        return ser.dumps(unpicklable_result(out, exc))


@dataclass
class _Job:
    key: str
    trial: Trial
    future: Future[TrialOutcome]
    submitted: float = field(default_factory=time.monotonic)
    seen_running: float | None = None
    timed_out: bool = False


def worker_python(conf: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The Python that Spark's executors run for this executor's trials, and why.

    pyspark started from a plain ``python`` (not ``spark-submit``) runs its
    workers with ``$PYSPARK_PYTHON``, else ``python3`` from the executors'
    ``PATH``: not the driver's interpreter when that is a virtual environment's
    called by its path (a notebook kernel, a cron job, an IDE), so the workers
    would not find ecopt. An explicit choice is kept.

    Args:
        conf: The Spark settings the user passed (``spark.pyspark.python`` there wins).

    Returns:
        ``(python, source)``: the executable, and where it came from
        (``"spark.pyspark.python"``, ``"PYSPARK_PYTHON"`` or ``"sys.executable"``).
    """
    if conf and conf.get("spark.pyspark.python"):
        return str(conf["spark.pyspark.python"]), "spark.pyspark.python"
    if os.environ.get("PYSPARK_PYTHON"):
        return os.environ["PYSPARK_PYTHON"], "PYSPARK_PYTHON"
    return sys.executable, "sys.executable"


#: Spark's words for an executor whose Python cannot run ecopt's task at all.
_NO_ECOPT = re.compile(r"ModuleNotFoundError: No module named '(ecopt|cloudpickle|pyspark)[.']"
                       r"|Cannot run program \"([^\"]+)\"")


class SparkExecutor(Executor):
    """Run trials as Spark tasks.

    Args:
        master: ``None`` (default): an embedded standalone cluster on this host,
            ``local-cluster[n_executors, cores_per_executor, memory_per_executor_mb]``
            (a real master, worker and executor JVMs), bound to 127.0.0.1 with
            no web UI. Or any Spark master URL: ``"spark://host:7077"``,
            ``"local[4]"``, ``"yarn"``, ``"k8s://..."``.
        context: A ``SparkContext`` (or a ``SparkSession``) you created; used as
            is and not stopped by this executor.
        n_executors: Executor JVMs of the embedded cluster (default:
            ``min(cpu_count, 4)``).
        cores_per_executor: Cores (task slots) per embedded executor (default 1:
            one trial per Python worker, so CPU-time estimates stay per trial).
        memory_per_executor_mb: Memory of each embedded executor JVM, in MiB.
        conf: More Spark settings for a context this executor creates
            (``{"spark.executor.memory": "4g", ...}``).
        trial_timeout_s: Record a trial failed (``TrialTimeout``) after this
            many seconds on an executor and cancel its task.
        worker_meter: A meter name (``"auto"``, ``"nvml"``, ``"rapl"``...) built in
            each executor's Python worker instead of the study's meter, which
            was chosen on the driver.
        poll_interval_s: How often the driver asks Spark which trials run (for
            timeouts).
        app_name: The Spark application name of a context this executor creates.

    The executors' Python workers run the driver's interpreter (``sys.executable``),
    however it was started, unless ``PYSPARK_PYTHON`` or ``conf={"spark.pyspark.python":
    ...}`` names another (a context you pass keeps its own). Workers that cannot import
    ecopt stop the study at its first trial with an
    :class:`~ecopt.executors.ExecutorLostError` saying which Python they ran.

    Raises:
        ValueError: for bad arguments (both ``master`` and ``context``...).
        SparkUnavailableError: when pyspark or Java is missing, or the master
            cannot be reached.
    """

    name = "spark"

    def __init__(self, master: str | None = None, *, context: Any = None,
                 n_executors: int | None = None, cores_per_executor: int = 1,
                 memory_per_executor_mb: int = 1024, conf: Mapping[str, str] | None = None,
                 trial_timeout_s: float | None = None, worker_meter: str | None = None,
                 poll_interval_s: float = 0.5, app_name: str = "ecopt") -> None:
        if master is not None and context is not None:
            raise ValueError("pass either master= or context=, not both")
        if master is not None and (not isinstance(master, str) or not master):
            raise ValueError(f"master must be a Spark master URL like 'spark://host:7077', "
                             f"got {master!r}")
        for name_, v in (("n_executors", n_executors), ("cores_per_executor", cores_per_executor),
                         ("memory_per_executor_mb", memory_per_executor_mb)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name_} >= 1 must hold, got {name_}={v!r}")
        if n_executors is not None and (master is not None or context is not None):
            raise ValueError("n_executors= sizes the embedded local-cluster; with master= or "
                             "context= the cluster decides how many executors run")
        if trial_timeout_s is not None and not trial_timeout_s > 0:
            raise ValueError(f"trial_timeout_s > 0 must hold, got {trial_timeout_s!r}")
        if poll_interval_s <= 0:
            raise ValueError(f"poll_interval_s > 0 must hold, got {poll_interval_s!r}")
        try:
            import pyspark
            from pyspark import SparkConf, SparkContext
        except ImportError:
            raise SparkUnavailableError(f"SparkExecutor needs pyspark: {_INSTALL_HINT}") from None

        self.trial_timeout_s = trial_timeout_s
        self.worker_meter = worker_meter
        self.poll_interval_s = poll_interval_s
        self.embedded = master is None and context is None
        self._owns_context = context is None
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._lost = False
        self._slots = SlotsCache(self._capacity)
        self.spark_version = pyspark.__version__

        if context is not None:
            sc = getattr(context, "sparkContext", context)  # a SparkSession or a SparkContext
            if not isinstance(sc, SparkContext):
                raise ValueError(f"context must be a SparkContext or SparkSession, got "
                                 f"{type(context).__name__}")
            self._sc = sc
            self.python = str(getattr(sc, "pythonExec", "") or "python3")
            self.python_source = "the SparkContext passed"
            retries = sc.getConf().get("spark.task.maxFailures", None)
            if retries not in (None, "1") or (retries is None and not str(sc.master).startswith("local")):
                log.warning("the SparkContext re-runs a failed task up to spark.task.maxFailures="
                            "%s times; a trial that crashes its executor would then be re-run "
                            "elsewhere. Set spark.task.maxFailures=1 so such trials are recorded "
                            "failed (WorkerLost) instead", retries or "4")
        else:
            n = n_executors or min(os.cpu_count() or 1, 4)
            url = master or f"local-cluster[{n},{cores_per_executor},{memory_per_executor_mb}]"
            sconf = SparkConf().setMaster(url).setAppName(app_name)
            sconf.set("spark.task.maxFailures", "1")
            if self.embedded or url.startswith("local"):
                # Everything on this host: listen on loopback only, no web UI.
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
                sconf.set("spark.driver.host", "127.0.0.1")
                sconf.set("spark.driver.bindAddress", "127.0.0.1")
                sconf.set("spark.ui.enabled", "false")
                # Executors on this host get this import path (the script's folder...).
                sconf.set("spark.executorEnv.PYTHONPATH", driver_python_path())
            # Executors run the driver's Python unless the user chose one: pyspark itself
            # reads only $PYSPARK_PYTHON (else python3 on the executors' PATH).
            self.python, self.python_source = worker_python(conf)
            sconf.set("spark.pyspark.python", self.python)
            for key, value in (conf or {}).items():
                sconf.set(str(key), str(value))
            if SparkContext._active_spark_context is not None:  # type: ignore[attr-defined]
                raise ValueError("a SparkContext already runs in this process (Spark allows one); "
                                 "pass it as SparkExecutor(context=sc)")
            try:
                self._sc = SparkContext(conf=sconf)
            except Exception as exc:
                raise SparkUnavailableError(
                    f"could not start Spark with master {url!r} ({type(exc).__name__}: "
                    f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc}); check "
                    f"that Java 17+ is installed (java -version) and the master is reachable; "
                    f"{_INSTALL_HINT}") from None
            self._sc.setLogLevel("ERROR")
            self._sc.pythonExec = self.python  # what pyspark sends with each job
            if self.embedded:
                self._wait_for_executors(n, timeout_s=120.0)
        self.master = str(self._sc.master)
        self._watcher = threading.Thread(target=self._watch, name="ecopt-spark-watch",
                                         daemon=True)
        self._watcher.start()

    # -- facts ---------------------------------------------------------------------------
    def _executor_count(self) -> int:
        """Executors registered now (the driver's block manager excluded)."""
        status = self._sc._jsc.sc().getExecutorMemoryStatus()
        return max(int(status.size()) - 1, 0)

    def _wait_for_executors(self, n: int, timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self._executor_count() >= n:
                return
            time.sleep(0.2)
        got = self._executor_count()
        self.close()
        raise SparkUnavailableError(f"the embedded Spark cluster started {got} of {n} executors "
                                    f"within {timeout_s:g} s; is memory short?")

    def _capacity(self) -> int:
        jsc = self._sc._jsc.sc()
        try:
            rp = jsc.resourceProfileManager().defaultResourceProfile()
            return int(jsc.maxNumConcurrentTasks(rp))
        except Exception:  # an older Spark or a master without the call: its default
            return int(self._sc.defaultParallelism)

    @property
    def slots(self) -> int:  # type: ignore[override]
        """Trials the cluster can run at once now (its task slots; refreshed every 2 s; >= 1)."""
        return self._slots.get(not self._closed and not self._lost)

    @property
    def context(self) -> Any:
        """The ``SparkContext`` in use."""
        return self._sc

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "master": self.master, "embedded": self.embedded,
                "slots": self.slots, "spark_version": self.spark_version,
                "python": self.python,
                "trial_timeout_s": self.trial_timeout_s, "worker_meter": self.worker_meter}

    # -- running trials ------------------------------------------------------------------
    def check_objective(self, objective: Callable[[Trial], Any]) -> None:
        from pyspark.serializers import CloudPickleSerializer

        check_picklable(objective, CloudPickleSerializer().dumps, "Spark executors")

    def _context_alive(self) -> bool:
        try:
            jsc = self._sc._jsc
            return jsc is not None and not bool(jsc.sc().isStopped())
        except Exception:  # the driver JVM (Py4J gateway) is gone
            return False

    def _lost_error(self) -> ExecutorLostError:
        return ExecutorLostError(f"the Spark driver for master {self.master} went away (its "
                                 "SparkContext stopped or its JVM died)")

    def _no_ecopt_error(self, m: re.Match[str] | None) -> ExecutorLostError:
        """The study-stopping error for executors whose Python cannot run ecopt's task."""
        what = (f"cannot start {m.group(2)!r}" if m is not None and m.group(2) else
                f"cannot import {m.group(1) if m is not None else 'ecopt'}")
        return ExecutorLostError(
            f"the Spark executors of {self.master} {what}: their Python workers run "
            f"{self.python!r} (from {self.python_source}), which must exist on every worker "
            "node and have ecopt installed. Install it there (pip install ecopt[spark] in "
            "that Python, with your objective's own packages), or point the workers at a "
            "Python that has it: PYSPARK_PYTHON=/path/to/python (set before the driver "
            "starts) or SparkExecutor(conf={'spark.pyspark.python': '/path/to/python'})")

    def submit(self, objective: Callable[[Trial], Any], trial: Trial) -> Future[TrialOutcome]:
        if self._closed:
            raise RuntimeError("this SparkExecutor is closed")
        if self._lost or not self._context_alive():
            self._lost = True
            raise self._lost_error()
        from pyspark.serializers import CloudPickleSerializer

        payload = CloudPickleSerializer().dumps((objective, trial))
        key = f"ecopt-trial-{trial.number}-{uuid.uuid4().hex[:12]}"
        fut: Future[TrialOutcome] = Future()
        fut.set_running_or_notify_cancel()
        job = _Job(key, trial, fut)
        with self._lock:
            self._jobs[key] = job
        threading.Thread(target=self._run_job, args=(job, payload), name=f"ecopt-spark-{key}",
                         daemon=True).start()
        return fut

    def _run_job(self, job: _Job, payload: bytes) -> None:
        """One driver thread per trial: run its one-task job and resolve its future."""
        from pyspark.serializers import CloudPickleSerializer

        meter = self.worker_meter
        try:
            self._sc.setJobGroup(job.key, f"ecopt trial {job.trial.number}",
                                 interruptOnCancel=True)
            data = self._sc.parallelize([payload], 1).map(
                lambda p: _run_in_task(p, meter)).collect()
            outcome = CloudPickleSerializer().loads(data[0])
        except BaseException as exc:  # noqa: BLE001 - every failure resolves the future
            self._resolve_failure(job, exc)
            return
        with self._lock:
            self._jobs.pop(job.key, None)
        if outcome.number == -1:  # the task could not unpickle the trial
            outcome = TrialOutcome.of(job.trial, error=outcome.error, host=outcome.host,
                                      worker=outcome.worker)
        if not job.future.done():
            job.future.set_result(outcome)

    def _resolve_failure(self, job: _Job, exc: BaseException) -> None:
        with self._lock:
            self._jobs.pop(job.key, None)
        if job.future.done():
            return
        text = str(exc)
        host = socket.gethostname() if self.master.startswith("local") else ""
        worker = ""
        m = re.search(r"[Ee]xecutor (\w+)", text)
        if m and m.group(1) != "heartbeat":
            worker = f"executor {m.group(1)}"
        duration_s = time.monotonic() - (job.seen_running or job.submitted)
        if job.timed_out:
            job.future.set_result(fault_outcome(
                job.trial, TRIAL_TIMEOUT,
                f"trial {job.trial.number} ran longer than trial_timeout_s="
                f"{self.trial_timeout_s:g} s on Spark ({self.master}); its task was cancelled "
                "and its Python worker stopped, the study goes on", worker=worker, host=host,
                duration_s=duration_s))
        elif self._closed:
            job.future.set_result(fault_outcome(
                job.trial, "Interrupted", "the executor was closed while the trial ran",
                worker=worker))
        elif any(p in text for p in _CONTEXT_GONE_PATTERNS) or not self._context_alive():
            self._lost = True
            job.future.set_exception(self._lost_error())
        elif _NO_ECOPT.search(text):
            # Every trial would fail the same way: stop at the first, saying what to fix.
            job.future.set_exception(self._no_ecopt_error(_NO_ECOPT.search(text)))
        elif any(p in text for p in _LOST_PATTERNS):
            reason = next(p for p in _LOST_PATTERNS if p in text)
            job.future.set_result(fault_outcome(
                job.trial, WORKER_LOST,
                f"the Spark {worker or 'executor'} running trial {job.trial.number} died "
                f"({reason}); the trial is recorded failed and may be proposed again, the study "
                "goes on with the other executors", worker=worker, host=host,
                duration_s=duration_s))
        elif "cancelled" in text:
            job.future.set_result(fault_outcome(
                job.trial, "Interrupted", f"the Spark job of trial {job.trial.number} was "
                "cancelled outside ecopt", worker=worker))
        else:
            job.future.set_exception(exc if isinstance(exc, Exception)
                                     else RuntimeError(f"{type(exc).__name__}: {exc}"))

    def _watch(self) -> None:
        """Note when trials start running; cancel the ones past ``trial_timeout_s``."""
        while not self._closed:
            time.sleep(self.poll_interval_s)
            with self._lock:
                jobs = [j for j in self._jobs.values() if not j.timed_out]
            if not jobs or self._lost:
                continue
            now = time.monotonic()
            try:
                tracker = self._sc.statusTracker()
                for job in jobs:
                    if job.seen_running is None and self._is_running(tracker, job.key):
                        job.seen_running = now
                    if self.trial_timeout_s is not None and job.seen_running is not None and \
                            now - job.seen_running > self.trial_timeout_s:
                        job.timed_out = True
                        self._sc.cancelJobGroup(job.key)
            except Exception:  # the driver JVM is going away: the jobs will say so
                continue

    @staticmethod
    def _is_running(tracker: Any, key: str) -> bool:
        for jid in tracker.getJobIdsForGroup(key):
            info = tracker.getJobInfo(jid)
            for sid in (info.stageIds if info is not None else []):
                st = tracker.getStageInfo(sid)
                if st is not None and st.numActiveTasks > 0:
                    return True
        return False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        interrupt_jobs(self._lock, self._jobs, lambda job: self._sc.cancelJobGroup(job.key))
        if self._owns_context:
            from pyspark import SparkContext

            if self._context_alive():
                try:
                    self._sc.stop()
                except Exception:
                    pass
            else:  # its JVM died: let a later SparkContext start a fresh one
                with SparkContext._lock:  # type: ignore[attr-defined]
                    SparkContext._active_spark_context = None  # type: ignore[attr-defined]
                    SparkContext._gateway = None  # type: ignore[attr-defined]
                    SparkContext._jvm = None  # type: ignore[attr-defined]
