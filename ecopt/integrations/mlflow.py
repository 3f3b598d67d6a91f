"""MLflow: every finished trial of a study becomes an MLflow run.

:class:`MLflowLogger` is a ``Study.optimize(callbacks=[...])`` callback (called
as ``logger(study, record)`` after each trial is saved). One MLflow experiment
per study (named after it), one run per trial, written with
``MlflowClient`` (no global active run is touched, so it works beside a
training script's own ``mlflow`` calls). What a run holds:

* **parameters**: the trial's configuration;
* **metrics**: the objective values and other metrics; ``energy_j`` and
  ``duration_s`` of the trial; per phase ``phase.<name>.energy_j``,
  ``.duration_s``, ``.samples``, ``.samples_per_joule``, ``.measured`` (1/0) and
  ``phase.<name>.<component>.energy_j`` (``cpu``, ``gpu_0``...);
* **the learning curve** (when the trial reported one, :meth:`ecopt.Trial.report`):
  each reported value under its own name at its step, with its wall-clock
  time, and ``curve.energy_j`` (joules spent by then) at the same steps; the
  final values are logged at the last step and later, so they are what the
  run shows;
* **tags**: ``ecopt.state`` (``complete``, ``failed``, ``infeasible``,
  ``pruned``), ``ecopt.trial_number``, ``ecopt.proposed_by``,
  ``ecopt.feasible``, ``ecopt.energy_measured`` and ``ecopt.energy_meter``,
  per phase ``ecopt.phase.<name>.source`` (``component=source`` pairs, e.g.
  ``cpu=estimate-cpu-time``) and ``ecopt.phase.<name>.measured``, the error
  type and message of a trial that did not complete, host, worker and device.
  An estimate is never shown as a measurement: ``measured`` says which it is.

The run's start and end times are the trial's; its status is ``FINISHED``
(complete), ``KILLED`` (pruned) or ``FAILED`` (failed, infeasible): the exact
state is the ``ecopt.state`` tag.

MLflow never stalls the study: runs are written by one background thread, and
a call waits at most ``timeout_s`` for its run (MLflow's own HTTP client
retries a down server for about four minutes). A server that fails or does not
answer is reported once, as a warning; while it is behind, later trials do not
wait at all. The trials themselves are always in the study's log, so
:meth:`MLflowLogger.log_study` back-fills whatever MLflow missed.

Example:
    >>> from ecopt.integrations.mlflow import MLflowLogger
    >>> study.optimize(objective, n_trials=20,
    ...                callbacks=[MLflowLogger("sqlite:///mlruns.db")])
"""

from __future__ import annotations

import atexit
import datetime as _dt
import logging
import weakref
import math
import queue
import re
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ecopt.trial import TrialRecord, TrialState

try:
    import mlflow
    from mlflow.entities import Metric, Param, RunStatus, RunTag
    from mlflow.tracking import MlflowClient
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError("ecopt.integrations.mlflow needs MLflow: pip install 'ecopt[mlflow]'") from exc

if TYPE_CHECKING:
    from ecopt.study import Study

__all__ = ["MLflowLogger", "run_status"]

log = logging.getLogger("ecopt")

_BAD_KEY = re.compile(r"[^\w.\- ]")
_MAX_TAG = 5000  # MLflow allows 8,000 characters; error messages get this much
_BATCH = 100  # MLflow's most params or tags per log_batch call (metrics: 1,000)


def _key(name: object) -> str:
    """A name MLflow accepts on every platform (letters, digits, ``_ - . space``)."""
    k = _BAD_KEY.sub("_", str(name)).strip() or "_"
    return "_" + k if set(k) <= {"."} else k[:250]


def _ms(iso: str, default_s: float) -> int:
    try:
        return int(_dt.datetime.fromisoformat(iso).timestamp() * 1000)
    except (TypeError, ValueError):
        return int(default_s * 1000)


def run_status(state: TrialState) -> str:
    """The MLflow run status of a trial state (the exact state goes in the ``ecopt.state`` tag)."""
    if state is TrialState.COMPLETE:
        return RunStatus.to_string(RunStatus.FINISHED)
    if state is TrialState.PRUNED:
        return RunStatus.to_string(RunStatus.KILLED)
    return RunStatus.to_string(RunStatus.FAILED)


def _chunks(items: list[Any], n: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


class MLflowLogger:
    """Log each finished trial as an MLflow run (a ``Study.optimize`` callback).

    Args:
        tracking_uri: Where MLflow stores runs (``"sqlite:///mlruns.db"``, an
            ``http://`` tracking server...); ``None`` uses MLflow's default
            (``MLFLOW_TRACKING_URI``).
        experiment_name: The MLflow experiment (created when missing); default:
            the study's name.
        run_name: Format of each run's name, with ``{number}`` and ``{state}``.
        tags: Extra tags on every run.
        log_curve: Log reported learning curves as step metrics.
        timeout_s: The longest a trial waits for its run to be stored (> 0).
            Past it the run is still written in the background, the delay is
            reported once, and later trials do not wait until MLflow has caught up.

    Example:
        >>> logger = MLflowLogger("sqlite:///mlruns.db", experiment_name="bert-energy")
        >>> study.optimize(objective, n_trials=20, callbacks=[logger])
        >>> logger.log_study(study)   # back-fill trials run before (skips logged ones)
    """

    def __init__(self, tracking_uri: str | None = None, experiment_name: str | None = None, *,
                 run_name: str = "trial-{number}", tags: Mapping[str, str] | None = None,
                 log_curve: bool = True, timeout_s: float = 10.0) -> None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) \
                or not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout_s > 0 must hold (finite seconds), got timeout_s={timeout_s!r}")
        try:
            run_name.format(number=0, state="complete")
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            raise ValueError(f"run_name may use only {{number}} and {{state}}, got "
                             f"{run_name!r} ({exc})") from None
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self.log_curve = bool(log_curve)
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.timeout_s = float(timeout_s)
        self._experiments: dict[str, str] = {}
        # The background writer: one thread, runs in trial order.
        self._queue: queue.Queue[tuple[Study, TrialRecord]] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._cond = threading.Condition()
        self._submitted = 0
        self._finished = 0  # runs written or given up (in submission order)
        self._behind = False  # a call gave up waiting: later calls do not wait
        self._failed: list[int] = []  # trial numbers MLflow did not store
        self._reported = False
        # Runs still queued when the interpreter exits get one more timeout_s to be written.
        ref = weakref.ref(self)
        atexit.register(lambda: (lambda me: me is not None and me.flush(me.timeout_s))(ref()))

    def __repr__(self) -> str:
        return (f"MLflowLogger(tracking_uri={self.client.tracking_uri!r}, "
                f"experiment_name={self.experiment_name!r})")

    # -- experiment ------------------------------------------------------------------
    def experiment_id(self, study: Study) -> str:
        """The id of the study's experiment (created, with the study's facts as tags, if missing)."""
        name = self.experiment_name or str(study.name or "ecopt-study")
        if name in self._experiments:
            return self._experiments[name]
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            eid = str(exp.experiment_id)
        else:
            spec = study.spec or {}
            tags = {"ecopt.study": str(study.name or ""),
                    "ecopt.objectives": ", ".join(f"{o.name} ({o.direction})"
                                                  for o in study.objectives)}
            if study.path is not None:
                tags["ecopt.study_dir"] = str(Path(study.path).resolve())
            if spec.get("meter") is not None:
                tags["ecopt.meter"] = str(spec.get("meter"))[:_MAX_TAG]
            try:
                eid = str(self.client.create_experiment(name, tags=tags))
            except mlflow.exceptions.MlflowException:  # created meanwhile by another process
                exp = self.client.get_experiment_by_name(name)
                if exp is None:
                    raise
                eid = str(exp.experiment_id)
        self._experiments[name] = eid
        return eid

    # -- one trial ----------------------------------------------------------------------
    def __call__(self, study: Study, record: TrialRecord) -> None:
        """Log ``record`` as a new run, waiting at most ``timeout_s`` for MLflow.

        Returns when MLflow has stored the run, when writing it failed (reported
        once as a warning), or after ``timeout_s`` (the run is still written in
        the background; reported once). While MLflow is behind, returns at once.
        """
        with self._cond:
            self._submitted += 1
            ticket = self._submitted
            wait = not self._behind
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._drain, name="ecopt-mlflow",
                                                daemon=True)
                self._worker.start()
        self._queue.put((study, record))
        if not wait:
            return
        with self._cond:
            if not self._cond.wait_for(lambda: self._finished >= ticket, self.timeout_s):
                self._behind = True
                self._report(f"MLflow ({self.client.tracking_uri}) has not stored trial "
                             f"{record.number}'s run after {self.timeout_s:g} s; runs go on being "
                             "written in the background and later trials do not wait for them")

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every submitted run is written or given up.

        Args:
            timeout_s: The longest to wait (``None``: as long as it takes).

        Returns:
            Whether nothing is left to write.
        """
        with self._cond:
            return self._cond.wait_for(lambda: self._finished >= self._submitted, timeout_s)

    @property
    def failed(self) -> list[int]:
        """Trial numbers whose run MLflow did not store (back-fill with :meth:`log_study`)."""
        with self._cond:
            return list(self._failed)

    def _drain(self) -> None:
        while True:
            study, record = self._queue.get()
            try:
                self.log_record(study, record)
            except Exception as exc:  # noqa: BLE001 - MLflow's failure never reaches the study
                with self._cond:
                    self._failed.append(record.number)
                self._report(f"MLflow ({self.client.tracking_uri}) did not store trial "
                             f"{record.number}'s run: {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}")
            with self._cond:
                self._finished += 1
                if self._finished >= self._submitted:
                    self._behind = False
                self._cond.notify_all()

    def _report(self, what: str) -> None:
        with self._cond:
            if self._reported:
                return
            self._reported = True
        log.warning("%s. The trials are saved in the study; reported once. Back-fill MLflow "
                    "later with MLflowLogger(...).log_study(<study dir>)", what)

    def log_record(self, study: Study, record: TrialRecord) -> str:
        """Log one finished trial as a new run and return the run's id."""
        now = time.time()
        start_ms = _ms(record.started_at, now - record.duration_s)
        end_ms = start_ms + int(record.duration_s * 1000)
        tags = self._tags(study, record)
        run = self.client.create_run(
            self.experiment_id(study), start_time=start_ms,
            tags={"mlflow.runName": tags["mlflow.runName"]},
            run_name=tags["mlflow.runName"])
        rid = run.info.run_id
        try:
            params = [Param(_key(k), str(v)[:6000]) for k, v in record.params.items()]
            metrics = self._metrics(record, start_ms, end_ms)
            run_tags = [RunTag(k, v) for k, v in tags.items() if k != "mlflow.runName"]
            for chunk in _chunks(params, _BATCH):
                self.client.log_batch(rid, params=chunk)
            for tchunk in _chunks(run_tags, _BATCH):
                self.client.log_batch(rid, tags=tchunk)
            for mchunk in _chunks(metrics, 1000):
                self.client.log_batch(rid, metrics=mchunk)
        except BaseException:
            self.client.set_terminated(rid, RunStatus.to_string(RunStatus.FAILED), end_ms)
            raise
        self.client.set_terminated(rid, run_status(record.state), end_ms)
        return str(rid)

    def _tags(self, study: Study, record: TrialRecord) -> dict[str, str]:
        tags = dict(self.tags)
        tags["mlflow.runName"] = self.run_name.format(number=record.number,
                                                      state=record.state.value)
        meters = sorted({p.measurement.meter for p in record.phases.values()})
        tags.update({
            "ecopt.study": str(study.name or ""),
            "ecopt.trial_number": str(record.number),
            "ecopt.state": record.state.value,
            "ecopt.feasible": str(record.feasible).lower(),
            "ecopt.proposed_by": record.proposed_by,
            "ecopt.energy_measured": str(record.measured).lower(),
            "ecopt.energy_meter": ",".join(meters),
        })
        for name, p in record.phases.items():
            src = ";".join(f"{c}={e.source}" for c, e in p.measurement.components.items())
            tags[f"ecopt.phase.{_key(name)}.source"] = src or "no energy"
            tags[f"ecopt.phase.{_key(name)}.measured"] = str(p.measured).lower()
        if record.error is not None:
            tags["ecopt.error_type"] = record.error.type
            tags["ecopt.error_message"] = record.error.message[:_MAX_TAG]
        for k in ("host", "worker", "device"):
            v = getattr(record, k)
            if v:
                tags[f"ecopt.{k}"] = str(v)
        return tags

    def _metrics(self, record: TrialRecord, start_ms: int, end_ms: int) -> list[Metric]:
        out: list[Metric] = []
        last_step = 0
        if self.log_curve and record.intermediate:
            for point in record.intermediate:
                t = start_ms + int(point.duration_s * 1000)
                out += [Metric(_key(k), float(v), t, point.step) for k, v in point.values.items()]
                out.append(Metric("curve.energy_j", float(point.energy_j), t, point.step))
            last_step = record.intermediate[-1].step

        def add(name: str, value: float | int | None) -> None:
            if value is not None and math.isfinite(float(value)):
                out.append(Metric(_key(name), float(value), end_ms, last_step))

        for k, v in record.values.items():
            add(k, v)
        for k, v in record.metrics.items():
            add(k, v)
        add("energy_j", record.energy_j if record.phases else None)
        add("duration_s", record.duration_s)
        for name, p in record.phases.items():
            pk = f"phase.{_key(name)}"
            add(f"{pk}.energy_j", p.energy_j)
            add(f"{pk}.duration_s", p.duration_s)
            add(f"{pk}.samples", p.samples)
            add(f"{pk}.samples_per_joule", p.samples_per_joule)
            add(f"{pk}.measured", 1.0 if p.measured else 0.0)
            for comp, c in p.measurement.components.items():
                add(f"{pk}.{_key(comp)}.energy_j", c.energy_j)
        return out

    # -- a whole study ---------------------------------------------------------------------
    def log_study(self, study: Study | str | Path) -> list[str]:
        """Log every finished trial of a study that has no run in the experiment yet.

        Args:
            study: A :class:`~ecopt.Study` or a study directory (read-only).

        Returns:
            The ids of the runs created, in trial-number order.
        """
        from ecopt.report.data import open_study

        st, _ = open_study(study)
        eid = self.experiment_id(st)
        logged: set[str] = set()
        token = None
        while True:
            page = self.client.search_runs([eid], max_results=1000, page_token=token)
            for run in page:
                n = run.data.tags.get("ecopt.trial_number")
                if n is not None:
                    logged.add(n)
            token = page.token
            if not token:
                break
        return [self.log_record(st, r) for r in sorted(st.records, key=lambda r: r.number)
                if str(r.number) not in logged]
