"""GPU power limit as a searchable dimension: set through NVML for a trial, always restored.

A GPU's power limit (``nvidia-smi -pl``) trades speed for energy, often
favourably: Zeus showed it is one of the best energy knobs of GPU training.
Here a trial sets it for its own duration:

* :func:`power_limit_range` gives the range the GPUs accept (for the search
  space: ``ecopt.Float(*power_limit_range(gpus=[0]))``);
* :func:`gpu_power_limit` (a context manager) sets a limit on the GPUs a trial
  uses and restores each GPU's original limit when the block ends, also when
  it raises (a failing trial, ``KeyboardInterrupt``) and when the process is
  told to stop (``SIGTERM``, ``SIGHUP``: see below);
* :class:`PowerLimitObjective` wraps an objective so a trial param
  (``power_limit_w`` by default) sets the limit around the whole trial.

The GPUs are always named (``gpus=[...]``, CUDA indices matched to NVML by
UUID, :mod:`ecopt.meters.gpus`): there is no "every GPU" default, which on a
shared node would cap other people's GPUs. MIG devices are refused (a MIG
slice has no power limit of its own; its parent GPU's limit caps every slice).

**Always restored.** The original limit is written to a host-local state file
(keyed by GPU UUID, with the process id, fsynced) **before** the limit is
changed. While a limit is held, handlers for ``SIGTERM`` (what batch
schedulers send) and ``SIGHUP`` (a closed terminal) restore it, then do what
the previous handler would have done (call it; ignore the signal; or, for the
default action, end the process with that signal); they are installed in the
main thread only (Python delivers signals there) and removed when the block
ends. A process killed by ``SIGKILL`` (or a crash, a power-cycled job) leaves
its entry: :func:`restore_stale_power_limits` puts back the limits of entries
whose process is gone. It runs where power limits are used (every
:func:`gpu_power_limit` block and every :class:`PowerLimitObjective` trial, so
a limit left by a dead process is never mistaken for the original), and on
demand: ``ecopt gpu restore`` (``--dry-run`` lists what it would restore).
Opening a study never touches GPU settings. After a reboot the driver has reset
every limit already, so entries from an earlier boot are dropped without
touching the GPU.

Each trial records (``trial.set_metric``) ``power_limit_w``,
``power_limit_enforced_w`` (read back: the limit in force, which another cap
may hold lower than the request), ``power_limit_original_w``,
``power_limit_min_w`` and ``power_limit_max_w`` (the first GPU's; all GPUs in
the user attribute ``power_limit``).

Permissions: changing a power limit needs root (the ``CAP_SYS_ADMIN``
capability); NVML answers ``NVML_ERROR_NO_PERMISSION`` otherwise, which
raises :class:`~ecopt.errors.PowerLimitError` saying so. **Without root, through
zeusd**: where Zeus's daemon runs (as root) and ``ZEUSD_SOCK_PATH`` (or
``ZEUSD_HOST_PORT``) names it, a process without ``CAP_SYS_ADMIN`` sets and
restores limits through it (Zeus's ``ZeusdClient.set_power_limit``; the daemon
numbers GPUs by NVML index, which ecopt's UUID mapping gives); reading the
limits and the state file stay as above. The daemon needs its ``gpu-control``
API group on (and, with authentication, a token with that scope). Persistence mode
(``sudo nvidia-smi -pm 1``) keeps the driver loaded between processes so a
limit is not lost when no process holds the GPU.

Example:
    >>> lo, hi = power_limit_range(gpus=[0])
    >>> space = ecopt.SearchSpace({"batch_size": ecopt.Int(16, 512, log=True),
    ...                            "power_limit_w": ecopt.Float(lo, hi)})
    >>> study.optimize(PowerLimitObjective(train_objective, gpus=[0]), n_trials=30)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ecopt._types import is_finite_number
from ecopt.errors import MeterError, MeterUnavailableError, PowerLimitError

__all__ = ["GpuLimit", "power_limit_range", "gpu_power_limit", "PowerLimitObjective",
           "restore_stale_power_limits", "default_state_path", "STATE_ENV", "gpu_cli_main",
           "power_limit_via"]

logger = logging.getLogger("ecopt.power_limit")

#: Environment variable overriding the state file's path.
STATE_ENV = "ECOPT_POWER_LIMIT_STATE"

#: Signals that restore the limits a process holds before it goes (see the module docstring).
RESTORE_SIGNALS = ("SIGTERM", "SIGHUP")

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
        enforced_w: The limit in force (``nvmlDeviceGetEnforcedPowerLimit``:
            the lower of the requested limit and any other cap), read after
            setting; ``None`` when NVML cannot say.
    """

    cuda_index: int
    uuid: str
    name: str
    original_w: float
    set_w: float | None
    min_w: float
    max_w: float
    default_w: float | None
    enforced_w: float | None = None

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


def _handles(nv: Any, gpus: Sequence[int] | None) -> list[Any]:
    """The :class:`~ecopt.meters.gpus.CudaGpu` of each requested GPU (``None``: every visible one)."""
    from ecopt.meters.gpus import cuda_gpus, mig_refusal, select_gpus

    try:
        visible = cuda_gpus(nv)
    except nv.NVMLError as exc:
        raise PowerLimitError(f"NVML failed while listing GPUs: {exc}") from None
    except MeterError as exc:
        raise PowerLimitError(str(exc)) from None
    if not visible:
        raise MeterUnavailableError(
            f"NVML sees no usable GPU (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}); a power limit needs one")
    out = [visible[i] for i in select_gpus(None if gpus is None else list(gpus), len(visible))]
    for g in out:
        if g.mig:
            raise PowerLimitError("no power limit for " + mig_refusal(g).replace(
                "charge that GPU's energy to this trial or cap it", "cap the shared GPU"))
    return out


def _read(nv: Any, g: Any) -> GpuLimit:
    h = g.handle
    try:
        lo, hi = nv.nvmlDeviceGetPowerManagementLimitConstraints(h)
        cur = nv.nvmlDeviceGetPowerManagementLimit(h)
    except nv.NVMLError as exc:
        if _error_code(exc) == getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3):
            raise PowerLimitError(
                f"GPU {g.cuda_index} does not support reading or setting a power limit through "
                f"NVML ({exc}); some boards and virtual GPUs do not: leave power_limit_w out of "
                "the search space") from None
        raise PowerLimitError(f"NVML failed reading the power limit of GPU {g.cuda_index}: "
                              f"{exc}") from None
    try:
        default: float | None = nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0
    except nv.NVMLError:
        default = None
    return GpuLimit(g.cuda_index, g.uuid, g.name, cur / 1000.0, None, lo / 1000.0, hi / 1000.0,
                    default, _enforced_w(nv, h))


def _enforced_w(nv: Any, h: Any) -> float | None:
    try:
        return float(nv.nvmlDeviceGetEnforcedPowerLimit(h)) / 1000.0
    except Exception:  # noqa: BLE001 - a fact to record, never a reason to fail
        return None


def power_limit_range(gpus: Sequence[int] | None = None) -> tuple[float, float]:
    """``(min_w, max_w)`` every given GPU accepts (the intersection of their ranges).

    Args:
        gpus: CUDA indices (default: every visible GPU; reading changes nothing).

    Raises:
        MeterUnavailableError: without nvidia-ml-py, a driver or a GPU.
        PowerLimitError: when a GPU cannot report its limits, is MIG, or the
            ranges do not overlap.
    """
    nv = _nvml()
    facts = [_read(nv, g) for g in _handles(nv, gpus)]
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


def _entry_pid(e: dict[str, Any]) -> int | None:
    """The entry's process id, ``None`` when missing or not a real pid (0, negative, not a number)."""
    pid = e.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, (int, str)):
        return None
    try:
        pid = int(pid)
    except ValueError:
        return None
    return pid if pid > 0 else None


def _alive(pid: int | None, start: str) -> bool:
    # os.kill(0, 0) and os.kill(-1, 0) signal a whole process group or every process,
    # so only a real pid (> 0) can say an entry's holder lives.
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    now = _process_start(pid)
    return not (start and now and now != start)


def _load(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
        if not isinstance(state, dict) or not isinstance(state.get("entries"), dict):
            raise ValueError("not an ecopt power-limit state")
    except FileNotFoundError:
        state = {"version": 1, "entries": {}}
    except ValueError as exc:
        logger.warning("power-limit state %s is unreadable (%s); starting it afresh", path, exc)
        state = {"version": 1, "entries": {}}
    return state


@contextlib.contextmanager
def _locked_state(path: Path, blocking: bool = True) -> Iterator[dict[str, Any]]:
    """Read the state under an exclusive lock, yield it, write it back (fsynced) if changed.

    Written back also when the block raises: every change made to the state
    records something already done to a GPU. With ``blocking=False`` a lock
    held elsewhere raises ``BlockingIOError`` at once (a signal handler must
    not wait for a lock its own interrupted thread may hold).
    """
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        try:
            state = _load(path)
            before = json.dumps(state, sort_keys=True)
            try:
                yield state
            finally:
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


def _has_sys_admin() -> bool:
    """Whether this process holds CAP_SYS_ADMIN (what NVML wants to change a power limit)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 21))
    except (OSError, ValueError, IndexError):
        pass
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _zeusd() -> Any | None:
    """Zeus's zeusd client when limits go through zeusd, else ``None``.

    They do when a zeusd is named (``ZEUSD_SOCK_PATH`` / ``ZEUSD_HOST_PORT``) and
    this process lacks CAP_SYS_ADMIN: the root daemon sets them on its behalf
    (``POST /gpu/set_power_limit``; zeusd numbers GPUs as NVML does).

    Raises:
        PowerLimitError: when the named zeusd does not answer or does not let this
            process control GPUs.
    """
    from ecopt.meters._zeus import zeusd_client, zeusd_configured

    if not zeusd_configured() or _has_sys_admin():
        return None
    try:
        client = zeusd_client(what="setting a GPU power limit")
    except MeterUnavailableError as exc:
        raise PowerLimitError(str(exc)) from None
    if not client.can_control_gpu:
        raise PowerLimitError(
            f"zeusd at {client.endpoint} does not let this process set GPU power limits (its "
            "gpu-control API group is off, or the token in ZEUSD_TOKEN lacks that scope); ask "
            "the administrator to enable it, or run as root")
    return client


def power_limit_via() -> str:
    """How this process would set a power limit: ``"nvml"`` or ``"zeusd (<endpoint>)"``.

    Raises:
        PowerLimitError: when a zeusd is named but does not answer or refuses GPU control.
    """
    zd = _zeusd()
    return "nvml" if zd is None else f"zeusd ({zd.endpoint})"


def _set(nv: Any, h: Any, cuda_index: int, watts: float, nvml_index: int | None = None,
         zd: Any = None) -> None:
    mw = int(round(watts * 1000))
    if zd is not None:
        index = int(nv.nvmlDeviceGetIndex(h)) if nvml_index is None else nvml_index
        try:
            zd.set_power_limit([index], mw, block=True)
        except Exception as exc:  # noqa: BLE001 - ZeusdError and transport errors alike
            raise PowerLimitError(f"zeusd at {zd.endpoint} failed setting the power limit of GPU "
                                  f"{cuda_index} (NVML index {index}) to {watts:.12g} W: "
                                  f"{exc}") from None
        return
    try:
        nv.nvmlDeviceSetPowerManagementLimit(h, mw)
    except nv.NVMLError as exc:
        code = _error_code(exc)
        if code == getattr(nv, "NVML_ERROR_NO_PERMISSION", 4):
            raise PowerLimitError(f"no permission to set the power limit of GPU {cuda_index} "
                                  f"(NVML_ERROR_NO_PERMISSION): {_PERMISSION_HINT}") from None
        if code == getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3):
            raise PowerLimitError(f"GPU {cuda_index} does not support setting a power limit "
                                  f"({exc})") from None
        raise PowerLimitError(f"NVML failed setting the power limit of GPU {cuda_index} to "
                              f"{watts:.12g} W: {exc}") from None


def _restore_stale(state: dict[str, Any], nv_factory: Callable[[], Any],
                   include_this_process: bool = False, dry_run: bool = False
                   ) -> list[dict[str, Any]]:
    """Restore (or, with ``dry_run``, list) the stale entries of a locked state; see
    :func:`restore_stale_power_limits`. Every entry restored or dropped is removed."""
    boot = _boot_id()
    me = os.getpid()
    out: list[dict[str, Any]] = []
    nv: Any = None
    zd: Any = None
    for uuid, e in list(state["entries"].items()):
        if not isinstance(e, dict):
            rec = {"uuid": uuid, "outcome": "dropped: unreadable entry"}
            if not dry_run:
                del state["entries"][uuid]
            out.append(rec)
            continue
        rec = {**e, "uuid": uuid}
        if e.get("boot_id", boot) != boot:
            rec["outcome"] = "dropped: earlier boot (the driver reset the limit)"
            if not dry_run:
                del state["entries"][uuid]
            out.append(rec)
            continue
        pid = _entry_pid(e)
        if not ((include_this_process and pid == me)
                or not _alive(pid, str(e.get("pid_start", "")))):
            continue  # held by a live process
        raw = e.get("original_mw")
        original = (int(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool)
                    and raw > 0 else None)
        to_default = original is None
        what = ("the board's default limit (no original limit was recorded)" if original is None
                else f"{original / 1000:g} W")
        if dry_run:
            rec["outcome"] = f"would restore {what}"
            out.append(rec)
            continue
        try:
            if nv is None:
                nv = nv_factory()
                zd = _zeusd()
            h = nv.nvmlDeviceGetHandleByUUID(uuid)
            mw = (int(nv.nvmlDeviceGetPowerManagementDefaultLimit(h)) if original is None
                  else original)
            if zd is not None:
                _set(nv, h, int(e.get("cuda_index", -1)), mw / 1000.0, zd=zd)
            else:
                nv.nvmlDeviceSetPowerManagementLimit(h, mw)
        except Exception as exc:  # noqa: BLE001 - reported, entry kept for a retry
            reason = str(exc)
            if nv is not None and _error_code(exc) == getattr(nv, "NVML_ERROR_NO_PERMISSION", 4):
                reason = f"no permission (NVML_ERROR_NO_PERMISSION): {_PERMISSION_HINT}"
            rec["outcome"] = f"failed: {reason}"
            logger.warning("could not restore the power limit of GPU %s (%s) to %s, left by "
                           "process %s: %s", uuid, e.get("name"), what, e.get("pid"), reason)
        else:
            rec["outcome"] = f"restored {mw / 1000:g} W" + (" (the board's default)"
                                                            if to_default else "")
            del state["entries"][uuid]
            set_mw = e.get("set_mw")
            logger.warning("restored the power limit of GPU %s (%s) to %s: process %s set %s and "
                           "is gone without restoring it", uuid, e.get("name"), what,
                           e.get("pid"), f"{set_mw / 1000:g} W"
                           if isinstance(set_mw, (int, float)) else "a limit")
        out.append(rec)
    return out


class _SignalGuard:
    """While a limit is held: SIGTERM and SIGHUP restore it, then act as the previous handler would."""

    def __init__(self, restore: Callable[[], object]) -> None:
        self._restore = restore
        self._prev: dict[int, Any] = {}
        self._active = True
        self._fn = self._handle  # one bound method, so `is` finds it installed

    def __enter__(self) -> _SignalGuard:
        if threading.current_thread() is not threading.main_thread():
            # Python delivers signals to the main thread only; the state file and
            # `ecopt gpu restore` cover a process killed while a worker thread held a limit.
            logger.debug("power limit held outside the main thread: no signal handlers")
            return self
        for name in RESTORE_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:  # pragma: no cover - not on this platform
                continue
            self._prev[sig] = signal.getsignal(sig)
            signal.signal(sig, self._fn)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self._active:
            self._active = False
            try:
                self._restore()
            except Exception as exc:  # noqa: BLE001 - the signal's own course must go on
                logger.warning("restoring GPU power limits on signal %s failed: %s", signum, exc)
        prev = self._prev.get(signum, signal.SIG_DFL)
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_IGN:
            return
        else:  # the default action of SIGTERM and SIGHUP: end the process by that signal
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def __exit__(self, *exc: object) -> None:
        self._active = False
        for sig, prev in self._prev.items():
            if signal.getsignal(sig) is self._fn:
                # None: the previous handler was not installed from Python; the default is
                # the nearest Python can put back.
                signal.signal(sig, signal.SIG_DFL if prev is None else prev)
            # else someone installed a handler after ours: leave theirs (ours, inactive,
            # only passes the signal on if they chain to it).


@contextlib.contextmanager
def gpu_power_limit(watts: float, gpus: Sequence[int] | None = None, trial: Any = None,
                    state_path: str | Path | None = None) -> Iterator[list[GpuLimit]]:
    """Set the power limit of ``gpus`` to ``watts`` for the block; restore the originals after.

    Limits left by processes that died holding them are restored first (so the
    original read here is the real one). The originals are written to the state
    file (fsynced) before anything is changed and removed once restored; while
    the block runs, ``SIGTERM`` and ``SIGHUP`` restore them too (see the module
    docstring); if restoring fails the entry stays, and
    :func:`restore_stale_power_limits` (or ``ecopt gpu restore``) retries after
    this process exits.

    Args:
        watts: The limit for every GPU, within each GPU's range.
        gpus: CUDA indices of the GPUs to cap (required: ``None`` is refused
            rather than cap every GPU of a shared node).
        trial: Record the limits in this trial's metrics and user attributes.
        state_path: The state file (default :func:`default_state_path`).

    Yields:
        One :class:`GpuLimit` per GPU (with ``set_w`` and ``enforced_w``).

    Raises:
        ValueError: without ``gpus``, or for a limit outside a GPU's range
            (naming the range) or not a finite number.
        PowerLimitError: without permission (saying what is needed), when a GPU
            does not support limits or is MIG, when another live process holds
            a GPU's limit, or when restoring fails.
        MeterUnavailableError: without nvidia-ml-py, a driver or a GPU.
    """
    if gpus is None:
        raise ValueError("gpus must name the GPUs whose power limit is set (CUDA indices, e.g. "
                         "gpus=[0]), got None: there is no default, because capping every GPU "
                         "this process can see would cap GPUs other jobs use")
    if not is_finite_number(watts):
        raise ValueError(f"power limit must be a finite number of watts, got {watts!r}")
    watts = float(watts)
    path = Path(state_path) if state_path is not None else default_state_path()
    nv = _nvml()
    targets = _handles(nv, gpus)
    zd = _zeusd()
    pid, start, boot = os.getpid(), _process_start(os.getpid()), _boot_id()
    since = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    with _locked_state(path) as state:
        _restore_stale(state, lambda: nv)
        facts = [_read(nv, g) for g in targets]
        for f in facts:
            if not f.min_w <= watts <= f.max_w:
                raise ValueError(f"power limit must lie in GPU {f.cuda_index}'s range "
                                 f"[{f.min_w:g}, {f.max_w:g}] W ({f.name}), got {watts:.12g} W")
            held = state["entries"].get(f.uuid)
            if isinstance(held, dict):  # restorable stale entries are gone by now
                hpid = _entry_pid(held)
                if _alive(hpid, str(held.get("pid_start", ""))):
                    raise PowerLimitError(
                        f"the power limit of GPU {f.cuda_index} ({f.uuid}) is already held by "
                        f"process {hpid} since {held.get('since')} (state file {path}); "
                        "one process at a time may change a GPU's limit")
                raise PowerLimitError(
                    f"the power limit of GPU {f.cuda_index} ({f.uuid}) was left at "
                    f"{_w(held.get('set_mw'))} by process {held.get('pid')}, which is gone, and "
                    f"could not be restored (state file {path}); run `ecopt gpu restore` to see "
                    "why, fix it, and try again (the limit now in force is not the original)")
        for f in facts:
            state["entries"][f.uuid] = {"pid": pid, "pid_start": start, "boot_id": boot,
                                        "host": socket.gethostname(), "since": since,
                                        "cuda_index": f.cuda_index, "name": f.name,
                                        "original_mw": int(round(f.original_w * 1000)),
                                        "set_mw": int(round(watts * 1000)),
                                        "min_mw": int(round(f.min_w * 1000)),
                                        "max_mw": int(round(f.max_w * 1000))}
    originals = {f.uuid: f for f in facts}
    handles = {g.uuid: g.handle for g in targets}
    nvml_indices = {g.uuid: g.nvml_index for g in targets}
    changed: list[str] = []  # UUIDs whose limit this block changed, in order

    def put_back(blocking: bool) -> list[str]:
        """Set each changed GPU back; release this process's entries. Returns the failures."""
        failures: list[str] = []
        release = [u for u in originals if u not in changed]
        for u in list(changed):
            f = originals[u]
            try:
                _set(nv, handles[u], f.cuda_index, f.original_w, nvml_indices[u], zd)
                release.append(u)
            except PowerLimitError as exc:
                failures.append(str(exc))
        try:
            with _locked_state(path, blocking=blocking) as st:
                for u in release:
                    e = st["entries"].get(u)
                    if isinstance(e, dict) and _entry_pid(e) == pid:
                        del st["entries"][u]
        except BlockingIOError:
            pass  # (in a signal handler) the entries stay: a later restore re-sets the originals
        return failures

    try:
        with _SignalGuard(lambda: put_back(blocking=False)):
            for f, g in zip(facts, targets):
                _set(nv, g.handle, f.cuda_index, watts, g.nvml_index, zd)
                changed.append(f.uuid)
            facts = [GpuLimit(**{**f.to_dict(), "set_w": watts,
                                 "enforced_w": _enforced_w(nv, g.handle)})
                     for f, g in zip(facts, targets)]
            if trial is not None:
                trial.set_user_attr("power_limit", [f.to_dict() for f in facts])
                trial.set_metric("power_limit_w", watts)
                if facts[0].enforced_w is not None:
                    trial.set_metric("power_limit_enforced_w", facts[0].enforced_w)
                trial.set_metric("power_limit_original_w", facts[0].original_w)
                trial.set_metric("power_limit_min_w", max(f.min_w for f in facts))
                trial.set_metric("power_limit_max_w", min(f.max_w for f in facts))
            yield facts
    finally:
        failures = put_back(blocking=True)
        if failures:
            raise PowerLimitError(
                "could not restore the original GPU power limit(s): " + "; ".join(failures)
                + f". The originals are kept in {path}; `ecopt gpu restore` (or "
                "restore_stale_power_limits()) puts them back once this process has exited "
                "(or set them with nvidia-smi -pl)")


def restore_stale_power_limits(state_path: str | Path | None = None, *,
                               include_this_process: bool = False,
                               dry_run: bool = False) -> list[dict[str, Any]]:
    """Put back the original limits left by processes that died while holding them.

    An entry is stale when its process is gone, or its pid is missing or not a
    real pid (0, negative). Entries of live processes are kept; entries from an
    earlier boot are dropped (the driver reset the limits at boot); every entry
    restored is removed, and one without a recorded original limit is restored
    to the board's default limit. Never raises: a GPU that cannot be restored
    (no permission, lost) keeps its entry and is logged as a warning.

    Args:
        state_path: The state file (default :func:`default_state_path`).
        include_this_process: Also restore this process's own entries (for an
            emergency exit, e.g. a watchdog about to ``os._exit``, where the
            ``finally`` of :func:`gpu_power_limit` will not run).
        dry_run: Change nothing; say what would be done (``outcome``
            ``would restore ...``).

    Returns:
        One dict per stale entry handled: the entry plus ``uuid`` and ``outcome``
        (``restored <W> W``, ``dropped: ...``, ``failed: <reason>`` or, with
        ``dry_run``, ``would restore ...``).
    """
    path = Path(state_path) if state_path is not None else default_state_path()
    if not path.exists():
        return []
    try:
        if dry_run:
            return _restore_stale(_load(path), _nvml, include_this_process, dry_run=True)
        with _locked_state(path) as state:
            return _restore_stale(state, _nvml, include_this_process)
    except Exception as exc:  # noqa: BLE001 - callers (a watchdog, a trial) must not fail on this
        logger.warning("could not check %s for stale GPU power limits: %s", path, exc)
        return []


@dataclass
class PowerLimitObjective:
    """Wrap an objective so the trial param ``param`` sets the GPU power limit for the trial.

    Trials without the param run without changing a limit (limits left by a
    dead process are restored first all the same). Picklable when the wrapped
    objective is (process and Dask executors ship it).

    Args:
        objective: The objective to run under the limit.
        param: The trial param holding the limit in watts.
        gpus: CUDA indices whose limit is set (required: no "every GPU" default).
        state_path: The state file (default :func:`default_state_path`).

    Raises:
        ValueError: without ``gpus``.

    Example:
        >>> study.optimize(PowerLimitObjective(my_objective, gpus=[0]), n_trials=20)
    """

    objective: Callable[[Any], Any]
    param: str = "power_limit_w"
    gpus: Sequence[int] | None = None
    state_path: str | None = None

    def __post_init__(self) -> None:
        if self.gpus is None:
            raise ValueError("PowerLimitObjective needs gpus=[...] (CUDA indices of the GPUs the "
                             "trials run on), got None: capping every visible GPU would cap GPUs "
                             "other jobs use")
        self.gpus = [int(g) for g in self.gpus]

    def __call__(self, trial: Any) -> Any:
        if self.param not in trial.params:
            restore_stale_power_limits(self.state_path)
            return self.objective(trial)
        with gpu_power_limit(float(trial.params[self.param]), self.gpus, trial, self.state_path):
            return self.objective(trial)


# -- ecopt gpu ----------------------------------------------------------------------------------


def gpu_cli_main(args: argparse.Namespace) -> int:
    """``ecopt gpu restore [--dry-run] [--state PATH] [--json]``.

    Exit status: 0 when nothing is left to restore (every stale entry restored
    or dropped, or none; with ``--dry-run``: listed); 1 when an entry could not
    be restored (it is kept for a retry; the line says why); 2 for bad input
    (handled by the ``ecopt`` command).
    """
    if getattr(args, "gpu_command", None) != "restore":
        print("ecopt gpu: say what to do: `ecopt gpu restore [--dry-run]`", file=sys.stderr)
        return 2
    path = Path(args.state) if args.state else default_state_path()
    handled = restore_stale_power_limits(path, dry_run=args.dry_run)
    held = [{**e, "uuid": u} for u, e in _load(path).get("entries", {}).items()
            if isinstance(e, dict) and u not in {h["uuid"] for h in handled}] \
        if path.exists() else []
    failed = [h for h in handled if str(h.get("outcome", "")).startswith("failed")]
    if args.json:
        print(json.dumps({"state_file": str(path), "dry_run": args.dry_run, "handled": handled,
                          "held_by_live_processes": held}, indent=2, sort_keys=True))
        return 1 if failed else 0
    print(f"power-limit state {path}: {len(handled)} stale entr{'y' if len(handled) == 1 else 'ies'}"
          f"{' (dry run: nothing changed)' if args.dry_run else ''}")
    for h in handled:
        print(f"  {h['uuid']} {h.get('name') or ''} (set {_w(h.get('set_mw'))} by process "
              f"{h.get('pid')}): {h['outcome']}")
    for h in held:
        print(f"  {h['uuid']} {h.get('name') or ''}: held by live process {h.get('pid')} "
              f"({_w(h.get('set_mw'))} since {h.get('since')}); left alone")
    if not handled:
        print("  nothing to restore")
    return 1 if failed else 0


def _w(mw: Any) -> str:
    return f"{mw / 1000:g} W" if isinstance(mw, (int, float)) and not isinstance(mw, bool) else "?"
