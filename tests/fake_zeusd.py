"""A fake zeusd: a real HTTP server on a Unix socket in a temp dir, speaking zeusd's protocol.

The protocol is what Zeus's client sends and reads (``zeus/utils/zeusd.py``,
``ZeusdClient``) and what the daemon's routes answer (``zeusd/src/routes``):

* ``GET /discover`` -> ``{"gpus": [{"id", "name", "pci_address",
  "cumulative_energy_available"}], "cpus": [{"id", "dram_available"}],
  "enabled_api_groups": [...], "auth_required": bool}``;
* ``GET /auth/whoami`` (Bearer token) -> ``{"sub", "scopes"}`` or 401;
* ``GET /cpu/get_cumulative_energy?cpu_ids=&cpu=&dram=`` -> ``{"<id>":
  {"cpu_energy_uj", "dram_energy_uj"}}``: read from a powercap tree, as the
  daemon reads ``/sys/class/powercap`` as root, with wrap-arounds folded in
  (``raw + wraps * max_energy_range_uj``, as ``zeusd/src/devices/cpu/rapl.rs``);
* ``POST /gpu/set_power_limit?gpu_ids=&power_limit_mw=&block=`` -> 200, or
  ``{"errors": {"<id>": msg}}`` with 400 for an unknown GPU; GPU ids are NVML
  indices (the daemon enumerates NVML); the limit is set on the fake NVML GPU
  as the root daemon would, whatever this process may do itself;
* ``GET /gpu/get_power_limit``, ``/gpu/get_power_limit_constraints``, ``/time``.

A route whose API group is disabled answers 404 (the daemon does not mount it);
with ``auth_required`` a missing or unknown token gets 401 and a token without
the route's scope 403. Every request is recorded in ``requests``.
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

__all__ = ["FakeZeusd", "running_zeusd"]

_GROUP = {"/gpu/get_cumulative_energy": "gpu-read", "/gpu/get_power": "gpu-read",
          "/gpu/get_power_limit": "gpu-read", "/gpu/get_power_limit_constraints": "gpu-read",
          "/gpu/set_power_limit": "gpu-control", "/cpu/get_cumulative_energy": "cpu-read",
          "/cpu/get_power": "cpu-read"}


@dataclass
class FakeZeusd:
    """State of the fake daemon (tests change it between requests).

    Attributes:
        socket_path: Where it listens.
        powercap: A powercap tree (``tests/meters/conftest.make_powercap``) whose
            packages are the daemon's CPUs; ``None``: no CPU.
        nvml: A fake ``pynvml`` module (``tests/fake_pynvml.py``) whose GPUs are the
            daemon's; ``None``: no GPU.
        groups: Enabled API groups.
        tokens: With ``auth_required``: token -> granted scopes.
    """

    socket_path: str
    powercap: Path | None = None
    nvml: Any = None
    groups: tuple[str, ...] = ("gpu-read", "gpu-control", "cpu-read")
    auth_required: bool = False
    tokens: dict[str, tuple[str, ...]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    _wraps: dict[str, int] = field(default_factory=dict)
    _last: dict[str, int] = field(default_factory=dict)

    # -- the daemon's devices ------------------------------------------------------------
    def _packages(self) -> list[tuple[int, Path, Path | None]]:
        if self.powercap is None:
            return []
        out = []
        for top in sorted(self.powercap.glob("intel-rapl:*")):
            parts = top.name.split(":")
            if len(parts) != 2 or not top.is_dir():
                continue
            dram = next((z for z in top.glob("intel-rapl:*")
                         if (z / "name").read_text().strip() == "dram"), None)
            out.append((int(parts[1]), top, dram))
        return out

    def _cumulative_uj(self, zone: Path) -> int:
        raw = int((zone / "energy_uj").read_text())
        key = str(zone)
        if key in self._last and raw < self._last[key]:
            self._wraps[key] = self._wraps.get(key, 0) + 1
        self._last[key] = raw
        return raw + self._wraps.get(key, 0) * int((zone / "max_energy_range_uj").read_text())

    def _gpus(self) -> list[Any]:
        return list(self.nvml.gpus) if self.nvml is not None else []

    # -- routes --------------------------------------------------------------------------
    def handle(self, method: str, path: str, q: dict[str, str], auth: str | None
               ) -> tuple[int, Any]:
        self.requests.append((method, path, q))
        if path == "/discover":
            return 200, {
                "gpus": [{"id": i, "name": g.name, "pci_address": g.pci_bus_id,
                          "cumulative_energy_available": g.energy_mj is not None}
                         for i, g in enumerate(self._gpus())],
                "cpus": [{"id": i, "dram_available": d is not None}
                         for i, _, d in self._packages()],
                "enabled_api_groups": list(self.groups), "auth_required": self.auth_required}
        if path == "/time":
            return 200, {"timestamp_ms": int(time.time() * 1000)}
        token = auth.split(" ", 1)[1] if auth and auth.startswith("Bearer ") else None
        if path == "/auth/whoami":
            if not self.auth_required:
                return 404, "auth is disabled"
            if token not in self.tokens:
                return 401, "invalid token"
            return 200, {"sub": "tester", "scopes": list(self.tokens[token])}
        group = _GROUP.get(path)
        if group is None or group not in self.groups:
            return 404, f"no route {path}"
        if self.auth_required:
            if token not in self.tokens:
                return 401, "Authentication required."
            if group not in self.tokens[token]:
                return 403, f"Insufficient permissions: needs {group}"
        if path == "/cpu/get_cumulative_energy" and method == "GET":
            pk = {i: (top, d) for i, top, d in self._packages()}
            ids = ([int(x) for x in q["cpu_ids"].split(",")] if q.get("cpu_ids")
                   else sorted(pk))
            bad = [i for i in ids if i not in pk]
            if bad:
                return 400, {"errors": {str(i): f"CPU index {i} does not exist." for i in bad}}
            out = {}
            for i in ids:
                top, dram = pk[i]
                out[str(i)] = {
                    "cpu_energy_uj": self._cumulative_uj(top) if q.get("cpu") == "true" else None,
                    "dram_energy_uj": (self._cumulative_uj(dram)
                                       if q.get("dram") == "true" and dram is not None else None)}
            return 200, out
        gpus = self._gpus()
        ids = ([int(x) for x in q["gpu_ids"].split(",")] if q.get("gpu_ids")
               else list(range(len(gpus))))
        bad = [i for i in ids if not 0 <= i < len(gpus)]
        if bad:
            return 400, {"errors": {str(i): f"GPU index {i} does not exist." for i in bad}}
        if path == "/gpu/set_power_limit" and method == "POST":
            mw = int(q["power_limit_mw"])
            for i in ids:
                g = gpus[i]
                if not g.min_limit_mw <= mw <= g.max_limit_mw:
                    return 400, {"errors": {str(i): "NVML error: Invalid Argument"}}
            for i in ids:
                gpus[i].set_limit(mw)  # the root daemon may, whatever this process may not
            return 200, None
        if path == "/gpu/get_power_limit":
            return 200, {str(i): {"power_limit_mw": gpus[i].power_limit_mw} for i in ids}
        if path == "/gpu/get_power_limit_constraints":
            return 200, {str(i): {"min_power_limit_mw": gpus[i].min_limit_mw,
                                  "max_power_limit_mw": gpus[i].max_limit_mw} for i in ids}
        return 404, f"no route {method} {path}"


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _handler(state: FakeZeusd) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self, method: str) -> None:
            url = urlparse(self.path)
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            status, body = state.handle(method, url.path, q, self.headers.get("Authorization"))
            data = b"" if body is None else (
                json.dumps(body).encode() if not isinstance(body, str) else body.encode())
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(body, str)
                             else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def log_message(self, *args: Any) -> None:  # quiet (and a Unix peer has no address)
            pass

    return Handler


@contextmanager
def running_zeusd(socket_path: str | Path, **state: Any) -> Iterator[FakeZeusd]:
    """Serve a :class:`FakeZeusd` on ``socket_path`` for the block (a thread; closed after)."""
    z = FakeZeusd(str(socket_path), **state)
    server = _Server(str(socket_path), _handler(z))
    thread = threading.Thread(target=server.serve_forever, name="fake-zeusd", daemon=True)
    thread.start()
    try:
        yield z
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        Path(socket_path).unlink(missing_ok=True)
