"""CPU package and DRAM energy from RAPL through Linux powercap sysfs (Intel and AMD).

The kernel's ``intel_rapl`` driver (used for AMD Zen too) exposes one zone per
socket and domain::

    /sys/class/powercap/intel-rapl:0/name                  -> "package-0"
    /sys/class/powercap/intel-rapl:0/energy_uj             -> cumulative microjoules
    /sys/class/powercap/intel-rapl:0/max_energy_range_uj   -> where energy_uj wraps to 0
    /sys/class/powercap/intel-rapl:0/intel-rapl:0:0/name   -> "core" | "uncore" | "dram"
    /sys/class/powercap/intel-rapl:0:0 -> intel-rapl:0/intel-rapl:0:0   (symlink)

A window's energy is the difference of two ``energy_uj`` reads per domain. The
counter wraps at ``max_energy_range_uj`` (262 kJ on many Intel parts, i.e. ~20
minutes at 200 W; far less on some AMD parts), so while a window is open a
background thread reads the counters every ``poll_s`` seconds and accumulates
wrap-corrected deltas: a long training phase never loses a wrap. ``core`` and
``uncore`` lie inside ``package`` and are not added (no double counting);
``intel-rapl-mmio`` zones duplicate ``package`` and are skipped; ``psys``
(platform) is skipped unless asked for.

Since Linux 5.10 (CVE-2020-8694, "Platypus") ``energy_uj`` is readable by root
only; the meter then fails at construction and says how to fix it.
"""

from __future__ import annotations

import errno
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecopt.errors import MeterError, MeterUnavailableError, RaplPermissionError
from ecopt.meters.base import ComponentEnergy, Meter

__all__ = ["RaplMeter", "RaplPermissionError", "DEFAULT_POWERCAP_ROOT", "find_rapl_domains"]

DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"
_ZONE = re.compile(r"^intel-rapl:(\d+)(?::(\d+))?$")


@dataclass(frozen=True)
class RaplDomain:
    """One powercap zone: ``component`` (``cpu:package-0``, ``dram:0``...) and its files."""

    component: str
    path: Path
    max_range_uj: int


def _permission_message(path: Path) -> str:
    return (
        f"RAPL counters exist but are readable by root only ({path}: permission denied; Linux "
        "restricts them since 5.10, CVE-2020-8694). Fix: run as root, or grant read access "
        "until reboot with `sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj "
        "/sys/class/powercap/intel-rapl:*/*/energy_uj`, or permanently with a udev rule / "
        "systemd-tmpfiles entry doing the same; or use meter='estimate'")


def find_rapl_domains(root: str | Path = DEFAULT_POWERCAP_ROOT, include_psys: bool = False
                      ) -> list[RaplDomain]:
    """The package and dram zones under a powercap root (no reads of ``energy_uj``).

    Returns ``[]`` when the root or its RAPL zones are absent.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    domains: list[RaplDomain] = []
    for top in sorted(root.iterdir(), key=lambda p: _sort_key(p.name)):
        m = _ZONE.match(top.name)
        if not m or m.group(2) is not None:  # sub-zones are found under their parent
            continue
        socket = int(m.group(1))
        zones = [top] + sorted((p for p in top.iterdir() if _ZONE.match(p.name)),
                               key=lambda p: _sort_key(p.name))
        for zone in zones:
            try:
                name = (zone / "name").read_text().strip()
                max_range = int((zone / "max_energy_range_uj").read_text().strip())
            except (OSError, ValueError):
                continue
            if name.startswith("package"):
                comp = f"cpu:{name}"
            elif name == "dram":
                comp = f"dram:{socket}"
            elif name == "psys" and include_psys:
                comp = "psys"
            else:
                continue  # core/uncore lie inside package; psys would double count
            domains.append(RaplDomain(comp, zone / "energy_uj", max_range))
    return domains


def _sort_key(name: str) -> tuple[int, ...]:
    m = _ZONE.match(name)
    if not m:
        return (1 << 30,)
    return tuple(int(g) for g in m.groups() if g is not None)


def _read_uj(path: Path) -> int:
    with open(path, "rb") as f:
        return int(f.read())


class RaplMeter(Meter):
    """CPU package and DRAM energy from RAPL counters (``source="rapl"``, measured).

    Args:
        root: The powercap directory (tests point it at a fake tree).
        domains: Which domains to report: any of ``"package"``, ``"dram"``,
            ``"psys"``.
        poll_s: Seconds between background reads while a window is open, to
            catch counter wrap-around; must be shorter than the time the
            counter takes to wrap (``max_energy_range_uj`` / power).

    Raises:
        MeterUnavailableError: when there are no RAPL zones under ``root``.
        RaplPermissionError: when the counters exist but cannot be read.
        ValueError: for an unknown domain or ``poll_s <= 0``.

    Example:
        >>> meter = RaplMeter()
        >>> w = meter.start(); work(); m = meter.stop(w)
        >>> sorted(m.components)
        ['cpu:package-0', 'dram:0']
    """

    name = "rapl"
    auto_priority = 50
    auto_covers = frozenset({"cpu", "dram"})

    def __init__(self, root: str | Path = DEFAULT_POWERCAP_ROOT,
                 domains: tuple[str, ...] | list[str] = ("package", "dram"),
                 poll_s: float = 2.0) -> None:
        super().__init__()
        bad = [d for d in domains if d not in ("package", "dram", "psys")]
        if bad or not domains:
            raise ValueError(f"domains must be a non-empty subset of ('package', 'dram', 'psys'), "
                             f"got {list(domains)!r}")
        if not poll_s > 0:
            raise ValueError(f"poll_s > 0 must hold, got {poll_s}")
        self.root = str(root)
        self.domains_requested = tuple(domains)
        self.poll_s = float(poll_s)
        self._setup()

    def _setup(self) -> None:
        found = find_rapl_domains(self.root, include_psys="psys" in self.domains_requested)
        want = set(self.domains_requested)
        doms = [d for d in found if (d.component.startswith("cpu:") and "package" in want)
                or (d.component.startswith("dram:") and "dram" in want)
                or (d.component == "psys" and "psys" in want)]
        if not doms:
            raise MeterUnavailableError(
                f"no RAPL powercap zones under {self.root!r} (not Linux, a VM or container "
                "without /sys/class/powercap, or the intel_rapl driver is not loaded: try "
                "`sudo modprobe intel_rapl_msr`); use meter='estimate'")
        self._domains = doms
        self._raw: dict[str, int] = {}
        self._total_uj: dict[str, int] = {}
        self._wraps: dict[str, int] = {}
        for d in doms:
            try:
                self._raw[d.component] = _read_uj(d.path)
            except PermissionError:
                raise RaplPermissionError(_permission_message(d.path)) from None
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM):
                    raise RaplPermissionError(_permission_message(d.path)) from None
                raise MeterUnavailableError(f"cannot read RAPL counter {d.path}: {exc}") from None
            self._total_uj[d.component] = 0
            self._wraps[d.component] = 0
        self._read_lock = threading.Lock()
        self._poller: threading.Thread | None = None
        self._poll_stop = threading.Event()
        self._poll_error: BaseException | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "domains_requested": self.domains_requested,
                "poll_s": self.poll_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._setup()

    @classmethod
    def is_available(cls, root: str | Path = DEFAULT_POWERCAP_ROOT, **options: Any) -> bool:
        try:
            doms = find_rapl_domains(root)
            return bool(doms) and all(_read_uj(d.path) >= 0 for d in doms)
        except Exception:
            return False

    @classmethod
    def probe(cls, **options: Any) -> tuple[bool, str]:
        """Builds the meter (cheap: no thread until a window opens) to say exactly why not."""
        try:
            cls(**options).close()
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            return False, f"{type(exc).__name__}: {exc}"
        return True, ""

    def summary(self) -> str:
        return "RAPL reads " + ", ".join(self.components)

    @property
    def components(self) -> list[str]:
        """Component names this meter reports."""
        return [d.component for d in self._domains]

    def _read(self) -> dict[str, int]:
        """Read every counter, fold wraps into the running totals, return the totals (µJ)."""
        with self._read_lock:
            for d in self._domains:
                try:
                    now = _read_uj(d.path)
                except OSError as exc:
                    raise MeterError(f"RAPL counter {d.path} became unreadable: {exc}") from None
                last = self._raw[d.component]
                delta = now - last
                if delta < 0:  # wrapped at max_energy_range_uj
                    delta += d.max_range_uj
                    self._wraps[d.component] += 1
                self._total_uj[d.component] += delta
                self._raw[d.component] = now
            return dict(self._total_uj)

    def _poll(self) -> None:
        while not self._poll_stop.wait(self.poll_s):
            with self._lock:
                if not self._open:
                    continue
            try:
                self._read()
            except Exception as exc:
                self._poll_error = exc
                return

    def _start(self) -> Any:
        if self._poller is None:
            self._poll_stop.clear()
            self._poller = threading.Thread(target=self._poll, name="ecopt-rapl-poll", daemon=True)
            self._poller.start()
        return (self._read(), dict(self._wraps))

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        if self._poll_error is not None:
            raise MeterError(f"RAPL background read failed: {self._poll_error}")
        start, wraps0 = state
        end = self._read()
        comps = {}
        for d in self._domains:
            k = d.component
            n_wraps = self._wraps[k] - wraps0[k]
            comps[k] = ComponentEnergy(
                (end[k] - start[k]) / 1e6, "rapl", True,
                note=f"counter wrapped {n_wraps} time(s) at {d.max_range_uj} uJ, corrected"
                if n_wraps else None)
        return comps

    def describe(self) -> dict[str, Any]:
        return {"meter": self.name, "measured": True, "root": self.root,
                "domains": {d.component: str(d.path.parent) for d in self._domains},
                "max_energy_range_uj": {d.component: d.max_range_uj for d in self._domains},
                "poll_s": self.poll_s}

    def close(self) -> None:
        poller = getattr(self, "_poller", None)
        if poller is not None:
            self._poll_stop.set()
            poller.join(timeout=5)
            self._poller = None
