"""Library errors. Bad arguments raise ``ValueError``; library states raise these."""

from __future__ import annotations


class EcoptError(Exception):
    """Base class for ecopt's own errors; messages say how to fix the state."""


class StudyLockedError(EcoptError):
    """Another process holds the study directory open for writing."""


class StorageError(EcoptError):
    """A line of the trial log could not be saved (disk full, I/O error).

    Nothing already in the log is lost, and the line that failed is not half
    written; the operation that raised (``tell()``, ``optimize()``) did not
    save its trial. Free space and re-open the study to resume.
    """


class MissingSpecError(EcoptError):
    """A study directory holds trials but its ``study.json`` is gone.

    Restore the file, run ``ecopt repair DIR`` (rebuilds it from the copy kept
    in ``running.jsonl``), or pass ``overwrite=True`` to start afresh (the old
    files are moved aside, never deleted).
    """


class SpecMismatchError(EcoptError):
    """A study directory was re-opened with a different space, objectives or constraints."""


class NotAStudyError(EcoptError):
    """A directory does not hold an ecopt study (no readable ``study.json``)."""


class MeterError(EcoptError):
    """A meter could not be set up or failed while measuring."""


class MeterUnavailableError(MeterError):
    """The hardware or library a meter needs is not present on this machine."""


class RaplPermissionError(MeterUnavailableError):
    """RAPL counters exist but this user may not read them."""


class ExecutorLostError(EcoptError):
    """The executor as a whole went away (e.g. the Dask scheduler stopped).

    Raised by :meth:`ecopt.Study.optimize` after every trial in flight was
    recorded as failed (``Interrupted``). The trial log is complete: restart the
    scheduler (or pick another executor), re-open the study with the same
    storage directory and call ``optimize`` again to resume.
    """


class SystematicFailureError(EcoptError):
    """Failures that are the objective's fault, not a bad region of the space.

    Raised by :meth:`ecopt.Study.optimize` (``fail_fast=k``) when the first
    ``k`` trials of the call all failed, when ``k`` failures in a row with the
    same error (type and raising line) surround a configuration that completed,
    or when more than half of the call's trials failed (from 10 trials on).
    Every trial is recorded before it is raised, so the study can be resumed
    once the objective is fixed.

    Attributes:
        trials: The numbers of the trials that failed that way, in order.
        error_type: The exception's type name (``"KeyError"``...) of the last.
        error_message: Its message.
        traceback: The formatted traceback of the last of them ("" when unknown).
        reason: Why the failures were judged systematic (the rule, in words).
    """

    reason: str = ""

    def __init__(self, message: str, trials: tuple[int, ...] = (), error_type: str = "",
                 error_message: str = "", traceback: str = "") -> None:
        super().__init__(message)
        self.trials = tuple(trials)
        self.error_type = error_type
        self.error_message = error_message
        self.traceback = traceback


class DaskUnavailableError(EcoptError):
    """Dask distributed is not installed, or its scheduler cannot be reached."""


class SparkUnavailableError(EcoptError):
    """pyspark or Java is not installed, or the Spark master cannot be reached."""


class RayUnavailableError(EcoptError):
    """ray is not installed, or the Ray cluster cannot be started or reached."""


class BackendUnavailableError(EcoptError):
    """The dataframe library a backend needs is not installed."""


class Infeasible(Exception):
    """Raise from an objective to mark the trial's configuration as infeasible.

    Infeasible trials (like out-of-memory ones) teach the sampler that a region
    cannot run; they are never treated as "zero efficiency".

    Example:
        >>> def objective(trial):
        ...     if trial.params["batch_size"] > 512:
        ...         raise ecopt.Infeasible("batch does not fit in VRAM")
    """


class TrialPruned(Exception):
    """Raise from an objective to stop a trial early on purpose (Optuna's convention).

    The trial is recorded ``pruned`` with its last reported values
    (:meth:`ecopt.Trial.report`) and the energy it spent; it never enters the
    front. Raise it when :meth:`ecopt.Trial.should_stop` returns ``True``.

    Example:
        >>> trial.report(epoch, {"accuracy": acc})
        >>> if trial.should_stop():
        ...     raise ecopt.TrialPruned()
    """


class DeviceUnavailableError(EcoptError):
    """A workload asked for a device (``cuda``, ``cuda:N``) this machine cannot provide."""


class PowerLimitError(EcoptError):
    """A GPU power limit could not be read, set or restored (the message says how to fix it)."""


class TransferSourceError(EcoptError):
    """A ``transfer_from`` source cannot be used: gone, changed, or not matchable."""
