"""Library errors. Bad arguments raise ``ValueError``; library states raise these."""

from __future__ import annotations


class EcoptError(Exception):
    """Base class for ecopt's own errors; messages say how to fix the state."""


class StudyLockedError(EcoptError):
    """Another process holds the study directory open for writing."""


class SpecMismatchError(EcoptError):
    """A study directory was re-opened with a different space, objectives or constraints."""


class NotAStudyError(EcoptError):
    """A directory does not hold an ecopt study (no readable ``study.json``)."""


class MeterError(EcoptError):
    """A meter could not be set up or failed while measuring."""


class MeterUnavailableError(MeterError):
    """The hardware or library a meter needs is not present on this machine."""


class Infeasible(Exception):
    """Raise from an objective to mark the trial's configuration as infeasible.

    Infeasible trials (like out-of-memory ones) teach the sampler that a region
    cannot run; they are never treated as "zero efficiency".

    Example:
        >>> def objective(trial):
        ...     if trial.params["batch_size"] > 512:
        ...         raise ecopt.Infeasible("batch does not fit in VRAM")
    """


class DeviceUnavailableError(EcoptError):
    """A workload asked for a device (``cuda``, ``cuda:N``) this machine cannot provide."""


class PowerLimitError(EcoptError):
    """A GPU power limit could not be read, set or restored (the message says how to fix it)."""
