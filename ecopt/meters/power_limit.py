"""GPU power limit as a searchable dimension: set through NVML for a trial, always restored.

A GPU's power limit (``nvidia-smi -pl``) trades speed for energy, often
favourably: Zeus showed it is one of the best energy knobs of GPU training.
Here a trial sets it for its own duration:

* :func:`power_limit_range` gives the range the GPUs accept (for the search
  space: ``ecopt.Float(*power_limit_range())``);
* :func:`gpu_power_limit` (a context manager) sets a limit on the GPUs a trial
  uses and restores each GPU's original limit when the block ends, also when
  it raises (a failing trial, ``KeyboardInterrupt``);
* :class:`PowerLimitObjective` wraps an objective so a trial param
  (``power_limit_w`` by default) sets the limit around the whole trial.

The original limit is written to a host-local state file (keyed by GPU UUID,
with the process id, fsynced) **before** the limit is changed, so a process
killed mid-trial (``SIGKILL``, a crash of the driver's client, a power-cycled
job) leaves a record: :func:`restore_stale_power_limits` puts back the limits
of entries whose process is gone (studies call it when they open). After a
reboot the driver has reset every limit already, so entries from an earlier
boot are dropped without touching the GPU.

Each trial records (``trial.set_metric``) ``power_limit_w``,
``power_limit_original_w``, ``power_limit_min_w`` and ``power_limit_max_w``
(the first GPU's; all GPUs in the user attribute ``power_limit``).

Permissions: changing a power limit needs root (the ``CAP_SYS_ADMIN``
capability); NVML answers ``NVML_ERROR_NO_PERMISSION`` otherwise, which
raises :class:`~ecopt.errors.PowerLimitError` saying so. Persistence mode
(``sudo nvidia-smi -pm 1``) keeps the driver loaded between processes so a
limit is not lost when no process holds the GPU.

Example:
    >>> lo, hi = power_limit_range(gpus=[0])
    >>> space = ecopt.SearchSpace({"batch_size": ecopt.Int(16, 512, log=True),
    ...                            "power_limit_w": ecopt.Float(lo, hi)})
    >>> study.optimize(PowerLimitObjective(train_objective, gpus=[0]), n_trials=30)
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ecopt.errors import MeterUnavailableError, PowerLimitError

__all__ = ["GpuLimit", "power_limit_range", "gpu_power_limit", "PowerLimitObjective",
           "restore_stale_power_limits", "default_state_path", "STATE_ENV"]

logger = logging.getLogger("ecopt.power_limit")

#: Environment variable overriding the state file's path.
STATE_ENV = "ECOPT_POWER_LIMIT_STATE"

_PERMISSION_HINT = (
    "changing a GPU power limit needs root (the CAP_SYS_ADMIN capability): run the study as "
    "root (e.g. with sudo), or have an administrator set the limit with "
    "`sudo nvidia-smi -i <index> -pl <watts>` and leave power_limit_w out of the search space; "
    "enable persistence mode (`sudo nvidia-smi -pm 1`) so the driver keeps limits between "
    "processes")


def default_state_path() -> Path:
    """Where original limits are kept: ``$ECOPT_POWER_LIMIT_STATE``, else per host under ``~/.local/state``.

    The host name is part of the default file name, so a home directory shared
    between machines keeps each machine's entries apart.
    """
    env = os.environ.get(STATE_ENV)
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "ecopt" / f"gpu-power-limits-{socket.gethostname()}.json"


@dataclass(frozen=True)
class GpuLimit:
    """One GPU's power-limit facts, in watts.

    Attributes:
        cuda_index: The GPU's CUDA index (honouring ``CUDA_VISIBLE_DEVICES``).
        uuid, name: NVML's identity of the GPU.
        original_w: The limit before the trial changed it.
        set_w: The limit the trial set (``None`` when only read).
        min_w, max_w: The range NVML accepts.
        default_w: The board's default limit.
    """

    cuda_index: int
    uuid: str
    name: str
    original_w: float
    set_w: float | None
    min_w: float
    max_w: float
    default_w: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- NVML access ----------------------------------------------------------------------------


def _nvml() -> Any:
    from ecopt.meters.nvml import _pynvml

    nv = _pynvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise MeterUnavailableError(
            f"NVML could not start ({exc}): no NVIDIA driver on this machine? A GPU power limit "
            "needs an NVIDIA GPU and its driver") from None
    return nv


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _error_code(exc: BaseException) -> int | None:
    return getattr(exc, "value", None)


def _handles(nv: Any, gpus: Sequence[int] | None) -> list[tuple[int, Any]]:
    """``(cuda index, handle)`` of the requested GPUs (default: every visible GPU)."""
    from ecopt.meters.nvml import select_gpus, visible_gpus

    try:
        visible = visible_gpus(nv)
    except nv.NVMLError as exc:
        raise PowerLimitError(f"NVML failed while listing GPUs: {exc}") from None
    if not visible:
        raise MeterUnavailableError(
            f"NVML sees no usable GPU (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}); a power limit needs one")
    return [(g, visible[g][1]) for g in select_gpus(None if gpus is None else list(gpus),
                                                    len(visible))]


def _read(nv: Any, cuda_index: int, h: Any) -> GpuLimit:
    try:
        lo, hi = nv.nvmlDeviceGetPowerManagementLimitConstraints(h)
        cur = nv.nvmlDeviceGetPowerManagementLimit(h)
        uuid, name = _text(nv.nvmlDeviceGetUUID(h)), _text(nv.nvmlDeviceGetName(h))
    except nv.NVMLError as exc:
        if _error_code(exc) == getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3):
            raise PowerLimitError(
                f"GPU {cuda_index} does not support reading or setting a power limit through "
                f"NVML ({exc}); some boards and virtual GPUs do not: leave power_limit_w out of "
                "the search space") from None
        raise PowerLimitError(f"NVML failed reading the power limit of GPU {cuda_index}: "
                              f"{exc}") from None
    try:
        default: float | None = nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0
    except nv.NVMLError:
        default = None
    return GpuLimit(cuda_index, uuid, name, cur / 1000.0, None, lo / 1000.0, hi / 1000.0, default)


def power_limit_range(gpus: Sequence[int] | None = None) -> tuple[float, float]:
    """``(min_w, max_w)`` every given GPU accepts (the intersection of their ranges).

    Args:
        gpus: CUDA indices (default: every visible GPU).

    Raises:
        MeterUnavailableError: without nvidia-ml-py, a driver or a GPU.
        PowerLimitError: when a GPU cannot report its limits, or the ranges do
            not overlap.
    """
    nv = _nvml()
    facts = [_read(nv, g, h) for g, h in _handles(nv, gpus)]
    lo, hi = max(f.min_w for f in facts), min(f.max_w for f in facts)
    if lo > hi:
        raise PowerLimitError(f"the GPUs' power-limit ranges do not overlap: "
                              f"{[(f.cuda_index, f.min_w, f.max_w) for f in facts]}")
    return lo, hi


# -- the state file --------------------------------------------------------------------------


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # pragma: no cover - non-Linux
        return ""


def _process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (guards against a reused pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # Field 22 (starttime), counted after the command name's closing parenthesis.
    return stat.rsplit(")", 1)[-1].split()[19]


def _alive(pid: int, start: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    now = _process_start(pid)
    return not (start and now and now != start)


@contextlib.contextmanager
def _locked_state(path: Path) -> Iterator[dict[str, Any]]:
    """Read the state under an exclusive lock, yield it, write it back (fsynced) if changed."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            try:
                state = json.loads(path.read_text())
                if not isinstance(state, dict) or not isinstance(state.get("entries"), dict):
                    raise ValueError("not an ecopt power-limit state")
            except FileNotFoundError:
                state = {"version": 1, "entries": {}}
            except ValueError as exc:
                logger.warning("power-limit state %s is unreadable (%s); starting it afresh", path,
                               exc)
                state = {"version": 1, "entries": {}}
            before = json.dumps(state, sort_keys=True)
            yield state
            if json.dumps(state, sort_keys=True) != before:
                _write(path, state)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write(path: Path, state: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# -- setting and restoring -------------------------------------------------------------------


def _set(nv: Any, h: Any, cuda_index: int, watts: float) -> None:
    try:
        nv.nvmlDeviceSetPowerManagementLimit(h, int(round(watts * 1000)))
    except nv.NVMLError as exc:
        code = _error_code(exc)
        if code == getattr(nv, "NVML_ERROR_NO_PERMISSION", 4):
            raise PowerLimitError(f"no permission to set the power limit of GPU {cuda_index} "
                                  f"(NVML_ERROR_NO_PERMISSION): {_PERMISSION_HINT}") from None
        if code == getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3):
            raise PowerLimitError(f"GPU {cuda_index} does not support setting a power limit "
                                  f"({exc})") from None
        raise PowerLimitError(f"NVML failed setting the power limit of GPU {cuda_index} to "
                              f"{watts:g} W: {exc}") from None


@contextlib.contextmanager
def gpu_power_limit(watts: float, gpus: Sequence[int] | None = None, trial: Any = None,
                    state_path: str | Path | None = None) -> Iterator[list[GpuLimit]]:
    """Set the power limit of ``gpus`` to ``watts`` for the block; restore the originals after.

    The originals are written to the state file (fsynced) before anything is
    changed and removed once restored; if restoring fails the entry stays, and
    :func:`restore_stale_power_limits` retries after this process exits.

    Args:
        watts: The limit for every GPU, within each GPU's range.
        gpus: CUDA indices (default: every visible GPU).
        trial: Record the limits in this trial's metrics and user attributes.
        state_path: The state file (default :func:`default_state_path`).

    Yields:
        One :class:`GpuLimit` per GPU (with ``set_w``).

    Raises:
        ValueError: for a limit outside a GPU's range (naming the range).
        PowerLimitError: without permission (saying what is needed), when a GPU
            does not support limits, when another live process holds a GPU's
            limit, or when restoring fails.
        MeterUnavailableError: without nvidia-ml-py, a driver or a GPU.
    """
    watts = float(watts)
    path = Path(state_path) if state_path is not None else default_state_path()
    nv = _nvml()
    targets = _handles(nv, gpus)
    facts = [_read(nv, g, h) for g, h in targets]
    for f in facts:
        if not f.min_w <= watts <= f.max_w:
            raise ValueError(f"power limit must lie in GPU {f.cuda_index}'s range "
                             f"[{f.min_w:g}, {f.max_w:g}] W ({f.name}), got {watts:g} W")
    facts = [GpuLimit(**{**f.to_dict(), "set_w": watts}) for f in facts]
    pid, start, boot = os.getpid(), _process_start(os.getpid()), _boot_id()
    since = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    with _locked_state(path) as state:
        for f in facts:
            held = state["entries"].get(f.uuid)
            if held is not None and held.get("boot_id", boot) == boot and \
                    _alive(int(held["pid"]), str(held.get("pid_start", ""))):
                raise PowerLimitError(
                    f"the power limit of GPU {f.cuda_index} ({f.uuid}) is already held by "
                    f"process {held['pid']} since {held.get('since')} (state file {path}); "
                    "one process at a time may change a GPU's limit")
        for f in facts:
            state["entries"][f.uuid] = {"pid": pid, "pid_start": start, "boot_id": boot,
                                        "host": socket.gethostname(), "since": since,
                                        "cuda_index": f.cuda_index, "name": f.name,
                                        "original_mw": int(round(f.original_w * 1000)),
                                        "set_mw": int(round(watts * 1000)),
                                        "min_mw": int(round(f.min_w * 1000)),
                                        "max_mw": int(round(f.max_w * 1000))}
    if trial is not None:
        trial.set_user_attr("power_limit", [f.to_dict() for f in facts])
        trial.set_metric("power_limit_w", watts)
        trial.set_metric("power_limit_original_w", facts[0].original_w)
        trial.set_metric("power_limit_min_w", max(f.min_w for f in facts))
        trial.set_metric("power_limit_max_w", min(f.max_w for f in facts))
    changed: list[tuple[GpuLimit, Any]] = []
    try:
        for f, (_, h) in zip(facts, targets):
            _set(nv, h, f.cuda_index, watts)
            changed.append((f, h))
        yield facts
    finally:
        failures: list[str] = []
        # Entries to release: GPUs restored, and GPUs never changed (a set failed first).
        release = [f.uuid for f in facts if all(f is not c for c, _ in changed)]
        for f, h in changed:
            try:
                _set(nv, h, f.cuda_index, f.original_w)
                release.append(f.uuid)
            except PowerLimitError as exc:
                failures.append(str(exc))
        with _locked_state(path) as state:
            for uuid in release:
                if state["entries"].get(uuid, {}).get("pid") == pid:
                    del state["entries"][uuid]
        if failures:
            raise PowerLimitError(
                "could not restore the original GPU power limit(s): " + "; ".join(failures)
                + f". The originals are kept in {path}; restore_stale_power_limits() puts them "
                "back once this process has exited (or set them with nvidia-smi -pl)")


def restore_stale_power_limits(state_path: str | Path | None = None, *,
                               include_this_process: bool = False) -> list[dict[str, Any]]:
    """Put back the original limits left by processes that died while holding them.

    Entries of live processes are kept; entries from an earlier boot are dropped
    (the driver reset the limits at boot). Never raises: a GPU that cannot be
    restored (no permission, lost) keeps its entry and is logged as a warning.

    Args:
        state_path: The state file (default :func:`default_state_path`).
        include_this_process: Also restore this process's own entries (for an
            emergency exit, e.g. a watchdog about to ``os._exit``, where the
            ``finally`` of :func:`gpu_power_limit` will not run).

    Returns:
        One dict per stale entry handled: the entry plus ``uuid`` and ``outcome``
        (``restored``, ``dropped: earlier boot`` or ``failed: <reason>``).
    """
    path = Path(state_path) if state_path is not None else default_state_path()
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    try:
        with _locked_state(path) as state:
            boot = _boot_id()
            me = os.getpid()
            stale = {u: e for u, e in state["entries"].items()
                     if not isinstance(e, dict) or e.get("boot_id", boot) != boot
                     or (include_this_process and e.get("pid") == me)
                     or not _alive(int(e.get("pid", -1)), str(e.get("pid_start", "")))}
            if not stale:
                return []
            nv: Any = None
            for uuid, e in stale.items():
                rec = {**(e if isinstance(e, dict) else {}), "uuid": uuid}
                if not isinstance(e, dict) or e.get("boot_id", boot) != boot:
                    rec["outcome"] = "dropped: earlier boot (the driver reset the limit)"
                    del state["entries"][uuid]
                    out.append(rec)
                    continue
                try:
                    if nv is None:
                        nv = _nvml()
                    h = nv.nvmlDeviceGetHandleByUUID(uuid)
                    nv.nvmlDeviceSetPowerManagementLimit(h, int(e["original_mw"]))
                except Exception as exc:  # noqa: BLE001 - reported, entry kept for a retry
                    reason = str(exc)
                    if nv is not None and _error_code(exc) == getattr(
                            nv, "NVML_ERROR_NO_PERMISSION", 4):
                        reason = f"no permission (NVML_ERROR_NO_PERMISSION): {_PERMISSION_HINT}"
                    rec["outcome"] = f"failed: {reason}"
                    logger.warning("could not restore the power limit of GPU %s (%s) to %.0f W "
                                   "left by dead process %s: %s", uuid, e.get("name"),
                                   e["original_mw"] / 1000, e.get("pid"), reason)
                else:
                    rec["outcome"] = "restored"
                    del state["entries"][uuid]
                    logger.warning("restored the power limit of GPU %s (%s) to %.0f W: process %s "
                                   "set %.0f W and died before restoring it", uuid, e.get("name"),
                                   e["original_mw"] / 1000, e.get("pid"), e["set_mw"] / 1000)
                out.append(rec)
    except Exception as exc:  # noqa: BLE001 - opening a study must not fail over this
        logger.warning("could not check %s for stale GPU power limits: %s", path, exc)
    return out


@dataclass
class PowerLimitObjective:
    """Wrap an objective so the trial param ``param`` sets the GPU power limit for the trial.

    Trials without the param run unchanged. Picklable when the wrapped
    objective is (process and Dask executors ship it).

    Args:
        objective: The objective to run under the limit.
        param: The trial param holding the limit in watts.
        gpus: CUDA indices whose limit is set (default: every visible GPU).
        state_path: The state file (default :func:`default_state_path`).

    Example:
        >>> study.optimize(PowerLimitObjective(my_objective, gpus=[0]), n_trials=20)
    """

    objective: Callable[[Any], Any]
    param: str = "power_limit_w"
    gpus: Sequence[int] | None = None
    state_path: str | None = None

    def __call__(self, trial: Any) -> Any:
        if self.param not in trial.params:
            return self.objective(trial)
        with gpu_power_limit(float(trial.params[self.param]), self.gpus, trial, self.state_path):
            return self.objective(trial)
