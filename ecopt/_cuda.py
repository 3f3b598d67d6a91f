"""Waiting for queued CUDA work: what the live trial and the meters both do around a window.

It lives on the ground floor so that :mod:`ecopt.trial` need not import
:mod:`ecopt.meters` (which re-exports it from :mod:`ecopt.meters.base`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["sync_cuda_if_used"]


def sync_cuda_if_used(devices: Sequence[int] | None = None) -> None:
    """Wait for the CUDA work queued on each of ``devices`` (``None``: the current device).

    A bare ``torch.cuda.synchronize()`` waits for the current device only, so
    each device is synchronised in turn. A no-op unless this process already
    imported torch and initialised CUDA: a meter must neither pull torch into a
    process that does not use it nor create a CUDA context. So a device where
    torch holds no memory (``torch.cuda.memory_reserved``: no tensor, so no work
    of this process) is skipped too: synchronising it would create a context
    there (hundreds of MB). Devices beyond the visible count are skipped.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return
        if devices is None:
            torch.cuda.synchronize()
            return
        n = torch.cuda.device_count()
        for d in devices:
            if 0 <= d < n and torch.cuda.memory_reserved(d) > 0:
                torch.cuda.synchronize(d)
    except Exception:  # pragma: no cover - best effort on odd builds
        pass
