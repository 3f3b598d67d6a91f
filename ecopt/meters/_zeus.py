"""The one door to Zeus (the ``zeus`` package, ML.ENERGY): lazy imports, zeusd connection.

ecopt reads AMD GPUs, Apple Silicon, Jetson and RAPL-through-zeusd with Zeus's
public device layer (``zeus.device``: ``AMDGPUs``, ``AppleSilicon``,
``Jetson``, ``ZeusdRAPLCPU``) and talks to zeusd with Zeus's client
(``zeus.utils.zeusd.ZeusdClient``). Zeus is an optional dependency (the
``zeus`` extra); nothing imports it before a Zeus-backed meter or a power
limit through zeusd is asked for.

**zeusd** is Zeus's small privileged daemon: an administrator runs it as root
(``zeusd serve --socket-path /var/run/zeusd.sock --socket-permissions 666``),
and unprivileged processes read RAPL and set GPU power limits through its
Unix socket (or TCP port). ecopt finds it where Zeus does: ``ZEUSD_SOCK_PATH``
(a socket), else ``ZEUSD_HOST_PORT`` (``host:port``), with ``ZEUSD_TOKEN`` when
the daemon requires authentication.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ecopt.errors import MeterUnavailableError
from ecopt.meters.base import Meter

__all__ = ["INSTALL_HINT", "ZeusMeter", "zeus_module", "zeus_installed", "zeusd_configured",
           "zeusd_client"]

INSTALL_HINT = "pip install 'ecopt[zeus]'"


def zeus_installed() -> bool:
    """Whether ``zeus`` can be imported (cheap: finds the spec only)."""
    import importlib.util

    try:
        return importlib.util.find_spec("zeus") is not None
    except (ImportError, ValueError):
        return False


def zeus_module(name: str, what: str) -> Any:
    """Import ``name`` (a ``zeus`` module) or say how to install Zeus.

    Args:
        name: e.g. ``"zeus.device.gpu.amd"``.
        what: What needs it, for the message (``"the AMD GPU meter"``).

    Raises:
        MeterUnavailableError: when Zeus is not installed or fails to import.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MeterUnavailableError(
            f"{what} reads the hardware through Zeus, which is not installed ({exc}); "
            f"{INSTALL_HINT}, or use meter='estimate'") from None
    except Exception as exc:  # noqa: BLE001 - e.g. an unofficial or stub pynvml under Zeus
        raise MeterUnavailableError(
            f"{what} reads the hardware through Zeus, which failed to import "
            f"({type(exc).__name__}: {exc})") from None


def zeusd_configured(socket_path: str | None = None, host_port: str | None = None) -> bool:
    """Whether a zeusd is named: by argument, ``ZEUSD_SOCK_PATH`` or ``ZEUSD_HOST_PORT``."""
    return bool(socket_path or host_port or os.environ.get("ZEUSD_SOCK_PATH")
                or os.environ.get("ZEUSD_HOST_PORT"))


def zeusd_client(socket_path: str | None = None, host_port: str | None = None,
                 token: str | None = None, what: str = "zeusd") -> Any:
    """A connected ``zeus.utils.zeusd.ZeusdClient``.

    Args:
        socket_path: zeusd's Unix socket (default ``$ZEUSD_SOCK_PATH``).
        host_port: zeusd's ``host:port`` when it listens on TCP (default
            ``$ZEUSD_HOST_PORT``; the socket wins when both are set).
        token: A JWT when the daemon requires one (default ``$ZEUSD_TOKEN``).
        what: What needs it, for the messages.

    Raises:
        MeterUnavailableError: when no zeusd is named, Zeus is not installed,
            or the daemon does not answer (the message says which).
    """
    mod = zeus_module("zeus.utils.zeusd", what)
    token = token if token is not None else os.environ.get("ZEUSD_TOKEN")
    if socket_path:
        config = mod.ZeusdConfig.uds(socket_path=socket_path, token=token)
    elif host_port:
        host, _, port = host_port.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"host_port must be 'host:port', got {host_port!r}")
        config = mod.ZeusdConfig.tcp(host, int(port), token=token)
    else:
        config = mod.ZeusdConfig.from_env()
        if config is None:
            raise MeterUnavailableError(
                f"{what} needs zeusd, and none is named: set ZEUSD_SOCK_PATH to its socket "
                "(or ZEUSD_HOST_PORT to host:port); an administrator starts it as root with "
                "`zeusd serve --socket-path /var/run/zeusd.sock --socket-permissions 666`")
        if token is not None and config.token is None:
            config = mod.ZeusdConfig(host_port=config.host_port, socket_path=config.socket_path,
                                     token=token)
    zeus_exc = zeus_module("zeus.exception", what)
    try:
        return mod.ZeusdClient(config)
    except zeus_exc.ZeusBaseError as exc:
        raise MeterUnavailableError(f"{what}: zeusd at {config.endpoint} does not answer "
                                    f"({exc}); is the daemon running?") from None


class ZeusMeter(Meter):
    """A meter over a Zeus device (AMD GPUs, a SoC, RAPL through zeusd).

    It opens the device in ``_setup``: when built, and again when unpickled in
    a worker (only its settings travel). It is available when its
    :meth:`~ecopt.meters.base.Meter.probe` says so (each subclass's probe says
    why not).
    """

    def _setup(self) -> None:
        raise NotImplementedError

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._setup()

    @classmethod
    def is_available(cls, **options: Any) -> bool:
        return cls.probe(**options)[0]
