"""CPU package and DRAM energy from RAPL through zeusd: RAPL without root (``meter="rapl-zeusd"``).

Since Linux 5.10 the RAPL counters (``energy_uj``) are readable by root only,
so :class:`~ecopt.meters.rapl.RaplMeter` fails for an ordinary user. Zeus's
daemon ``zeusd`` runs as root and serves the counters over a Unix socket (or
TCP); this meter reads them through Zeus's device objects
(``zeus.device.cpu.rapl.ZeusdRAPLCPU``, one per CPU package the daemon
lists), so the process itself needs no privilege. See :mod:`ecopt.meters._zeus`
for how the daemon is found (``ZEUSD_SOCK_PATH``).

The daemon returns cumulative microjoules with the counter's wrap-arounds
already folded in (``zeusd/src/devices/cpu/rapl.rs``), so a window's energy
is the difference of two reads, as for :class:`~ecopt.meters.rapl.RaplMeter`;
components have the same names (``cpu:package-<i>``, ``dram:<i>``) and the
source ``rapl-zeusd`` (measured). Each read is one HTTP request per package
over the socket (well under a millisecond locally).
"""

from __future__ import annotations

from typing import Any

from ecopt.errors import MeterError, MeterUnavailableError
from ecopt.meters._zeus import ZeusMeter, zeus_module, zeusd_client, zeusd_configured
from ecopt.meters.base import FLAG_LOWER_BOUND, ComponentEnergy

__all__ = ["ZeusdRaplMeter"]

_WHAT = "the RAPL-through-zeusd meter"


class ZeusdRaplMeter(ZeusMeter):
    """RAPL energy read by zeusd (``source="rapl-zeusd"``, measured), for processes without root.

    Args:
        socket_path: zeusd's Unix socket (default ``$ZEUSD_SOCK_PATH``).
        host_port: zeusd's ``host:port`` (default ``$ZEUSD_HOST_PORT``).
        token: JWT when the daemon requires one (default ``$ZEUSD_TOKEN``).
        dram: Also report DRAM where the daemon has it.

    Raises:
        MeterUnavailableError: without Zeus, without a named zeusd, when it
            does not answer, or when it serves no CPU (its ``cpu-read`` API
            group off, or the token lacks that scope).

    Example:
        >>> meter = ecopt.meters.get_meter("rapl-zeusd")     # ZEUSD_SOCK_PATH is set
        >>> w = meter.start(); work(); m = meter.stop(w)
        >>> m.components["cpu:package-0"].source
        'rapl-zeusd'
    """

    name = "rapl-zeusd"
    auto_priority = 45  # after direct RAPL (no daemon in the way), before any estimate
    auto_covers = frozenset({"cpu", "dram"})

    def __init__(self, socket_path: str | None = None, host_port: str | None = None,
                 token: str | None = None, dram: bool = True) -> None:
        super().__init__()
        self.socket_path = socket_path
        self.host_port = host_port
        self.token = token
        self.dram = bool(dram)
        self._setup()

    def _setup(self) -> None:
        client = zeusd_client(self.socket_path, self.host_port, self.token, _WHAT)
        rapl = zeus_module("zeus.device.cpu.rapl", _WHAT)
        zeusd = zeus_module("zeus.utils.zeusd", _WHAT)
        if not client.cpu_ids:
            raise MeterUnavailableError(f"zeusd at {client.endpoint} lists no CPU package "
                                        "(no RAPL on its host?); use meter='estimate'")
        try:
            self._cpus = [rapl.ZeusdRAPLCPU(i, client) for i in client.cpu_ids]
        except (zeusd.ZeusdCapabilityError, zeusd.ZeusdAuthError) as exc:
            raise MeterUnavailableError(
                f"zeusd at {client.endpoint} does not let this process read RAPL ({exc}); "
                "the daemon needs its cpu-read API group enabled (and, with authentication, "
                "a token with that scope in ZEUSD_TOKEN)") from None
        self._client = client
        self._endpoint = str(client.endpoint)
        self._read()  # fail now rather than in the first window

    def __getstate__(self) -> dict[str, Any]:
        return {"socket_path": self.socket_path, "host_port": self.host_port,
                "token": self.token, "dram": self.dram}

    @classmethod
    def probe(cls, socket_path: str | None = None, host_port: str | None = None,
              token: str | None = None, **options: Any) -> tuple[bool, str]:
        """A zeusd is named and serves RAPL to this process (one ``/discover`` request)."""
        if not zeusd_configured(socket_path, host_port):
            return False, ("no zeusd named (set ZEUSD_SOCK_PATH to the socket of Zeus's "
                           "daemon to read RAPL without root)")
        try:
            cls(socket_path, host_port, token, **options).close()
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            return False, f"{type(exc).__name__}: {exc}"
        return True, ""

    @property
    def components(self) -> list[str]:
        """Component names this meter reports."""
        out = []
        for c in self._cpus:
            out.append(f"cpu:package-{c.cpu_index}")
            if self.dram and c.supports_get_dram_energy_consumption():
                out.append(f"dram:{c.cpu_index}")
        return out

    def _read(self) -> dict[str, float]:
        zexc = zeus_module("zeus.exception", _WHAT)
        out: dict[str, float] = {}
        for c in self._cpus:
            try:
                m = c.get_total_energy_consumption()
            except (zexc.ZeusBaseError, OSError) as exc:
                raise MeterError(f"zeusd at {self._endpoint} failed reading RAPL of CPU "
                                 f"{c.cpu_index}: {exc}") from None
            except Exception as exc:  # httpx errors: the daemon went away
                raise MeterError(f"zeusd at {self._endpoint} stopped answering while reading "
                                 f"RAPL of CPU {c.cpu_index}: {type(exc).__name__}: "
                                 f"{exc}") from None
            out[f"cpu:package-{c.cpu_index}"] = float(m.cpu_mj)
            if self.dram and m.dram_mj is not None:
                out[f"dram:{c.cpu_index}"] = float(m.dram_mj)
        return out

    def _start(self) -> Any:
        return self._read()

    def _stop(self, state: Any, duration_s: float) -> dict[str, ComponentEnergy]:
        end = self._read()
        comps: dict[str, ComponentEnergy] = {}
        for k, e1 in end.items():
            if k not in state:
                continue
            delta_mj = e1 - state[k]
            if delta_mj < 0:  # the daemon restarted and lost the wraps it had counted
                comps[k] = ComponentEnergy(0.0, "rapl-zeusd", True,
                                           note="zeusd's count went back during the window "
                                                "(the daemon restarted): energy unknown, 0 J "
                                                "is a lower bound", flags=(FLAG_LOWER_BOUND,))
            else:
                comps[k] = ComponentEnergy(delta_mj / 1000.0, "rapl-zeusd", True)
        return comps

    def describe(self) -> dict[str, Any]:
        return {"meter": self.name, "measured": True, "zeusd": self._endpoint,
                "sources": {c: "rapl-zeusd" for c in self.components}}

    def summary(self) -> str:
        return f"RAPL through zeusd ({self._endpoint}) reads " + ", ".join(self.components)
