"""Which NVIDIA GPUs a trial uses: CUDA's numbering matched to NVML's by UUID, MIG, scope.

CUDA and NVML number the same GPUs differently:

* NVML's index order is not guaranteed ("The order in which NVML enumerates
  devices has no guarantees of consistency between reboots. For that reason it
  is recommended that devices be looked up by their PCI ids or UUID", NVML API
  reference, ``nvmlDeviceGetHandleByIndex``).
* CUDA enumerates GPUs fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
  (CUDA C Programming Guide, "CUDA Environment Variables"), and then
  ``CUDA_VISIBLE_DEVICES`` picks and reorders them (indices into that order,
  ``GPU-<uuid>`` prefixes or ``MIG-<uuid>`` entries; the first invalid entry
  hides the rest).

So ``cuda:1`` is found on the NVML side by UUID (:func:`cuda_gpus`), in this order:

1. this process initialised CUDA through torch: torch's own device UUIDs
   (``torch.cuda.get_device_properties(i).uuid``) against ``nvmlDeviceGetUUID``;
   torch is never imported and CUDA never initialised here (that would pull
   torch into processes that do not use it and create a CUDA context);
2. ``CUDA_VISIBLE_DEVICES`` names UUIDs: those;
3. CUDA's order is known: PCI bus order, when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
   or every GPU is the same model (fastest first cannot tell identical GPUs
   apart and keeps their PCI order);
4. otherwise (different models, CUDA's fastest-first order, CUDA not yet
   initialised) the mapping is unknown and :class:`~ecopt.errors.MeterError`
   says how to make it known, rather than meter or cap the wrong GPU.

**MIG.** A MIG slice has no energy counter or power reading in NVML (its
handle answers ``NVML_ERROR_NOT_SUPPORTED``), and its parent GPU's counter and
power limit cover every slice, other tenants' work included. ecopt therefore
refuses MIG with :class:`~ecopt.errors.MeterUnavailableError` saying so (as
Zeus does) instead of charging a trial with a whole shared GPU: each
:class:`CudaGpu` says whether it is MIG (``mig``), and the NVML meter and the
power limits refuse such a GPU when asked to use it.

**Scope.** :func:`gpu_scope` declares the CUDA devices the work inside a block
uses (the workloads do it from their ``device``); NVML meters built without
``gpus=`` meter exactly those, and every meter waits for their queued work at
both ends of a window.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ecopt.errors import MeterError, MeterUnavailableError

__all__ = ["CudaGpu", "cuda_gpus", "visible_gpu_selectors", "select_gpus", "gpu_scope",
           "current_gpu_scope", "device_index", "torch_cuda_uuids", "mig_refusal"]

_SCOPE: contextvars.ContextVar[tuple[int, ...] | None] = contextvars.ContextVar(
    "ecopt_gpu_scope", default=None)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def visible_gpu_selectors(env: str | None = None) -> list[str] | None:
    """Entries of ``CUDA_VISIBLE_DEVICES`` (``None`` when unset: every GPU is visible).

    Args:
        env: The variable's value (default: read from the environment).
    """
    value = os.environ.get("CUDA_VISIBLE_DEVICES") if env is None else env
    if value is None:
        return None
    out: list[str] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        # CUDA stops at the first invalid entry (e.g. "-1" hides every GPU).
        if item.lstrip("-").isdigit() and int(item) < 0:
            break
        out.append(item)
    return out


def select_gpus(requested: Sequence[int] | None, n_visible: int) -> list[int]:
    """The CUDA indices asked for (default: all ``n_visible``), checked.

    Raises:
        ValueError: for an empty list, an index outside ``[0, n_visible - 1]`` or a repeat.
    """
    wanted = [int(g) for g in requested] if requested is not None else list(range(n_visible))
    if not wanted:
        raise ValueError("gpus must name at least one GPU index, got []")
    for g in wanted:
        if not 0 <= g < n_visible:
            raise ValueError(
                f"GPU index must be in [0, {n_visible - 1}] ({n_visible} visible GPU(s), "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}), got {g}")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"GPU indices must be unique, got {wanted}")
    return wanted


@dataclass(frozen=True)
class CudaGpu:
    """One GPU as this process's CUDA numbers it, with its NVML identity.

    Attributes:
        cuda_index: What torch calls ``cuda:<cuda_index>`` in this process.
        nvml_index: NVML's index of the physical GPU.
        uuid: NVML's UUID of the physical GPU (``GPU-...``).
        name: NVML's name of the GPU.
        pci_bus_id: NVML's PCI bus id (``""`` when NVML cannot say).
        handle: NVML's handle of the physical GPU.
        mapped_by: How ``cuda_index`` was matched to the NVML device.
        torch_uuid: torch's UUID of the device when torch told it, else ``None``.
        mig: ``None``, or why this device is MIG (a MIG slice, or a GPU in MIG mode).
    """

    cuda_index: int
    nvml_index: int
    uuid: str
    name: str
    pci_bus_id: str
    handle: Any
    mapped_by: str
    torch_uuid: str | None = None
    mig: str | None = None

    def facts(self) -> dict[str, Any]:
        """JSON-able identity and mapping (for ``describe()`` and the host facts)."""
        return {"cuda_index": self.cuda_index, "nvml_index": self.nvml_index, "uuid": self.uuid,
                "name": self.name, "pci_bus_id": self.pci_bus_id, "mapped_by": self.mapped_by,
                "torch_uuid": self.torch_uuid, "mig": self.mig}


def mig_refusal(g: CudaGpu) -> str:
    """Why a MIG device is not metered or capped (the message of the refusal)."""
    return (f"cuda:{g.cuda_index} is {g.mig} (GPU {g.name}, {g.uuid}). NVML has no energy "
            "counter or power reading per MIG slice, and the parent GPU's counter and power "
            "limit cover every slice, other users' work included, so ecopt will not charge "
            "that GPU's energy to this trial or cap it. Run on a whole GPU (MIG mode off), or "
            "use meter='estimate' (labelled as an estimate)")


def torch_cuda_uuids() -> list[str] | None:
    """torch's UUID of each CUDA device, when this process has initialised CUDA through torch.

    ``None`` when torch is not imported, CUDA is not initialised, or the build
    gives no UUIDs: this never imports torch nor initialises CUDA.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        out = []
        for i in range(int(torch.cuda.device_count())):
            u = getattr(torch.cuda.get_device_properties(i), "uuid", None)
            if u is None:
                return None
            out.append(str(u))
        return out
    except Exception:  # noqa: BLE001 - odd builds: fall back to the other rules
        return None


@dataclass(frozen=True)
class _Phys:
    index: int
    handle: Any
    uuid: str
    name: str
    pci_bus_id: str
    mig_mode: bool


def _physical(nv: Any) -> list[_Phys]:
    out = []
    for i in range(int(nv.nvmlDeviceGetCount())):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        try:
            pci = _text(nv.nvmlDeviceGetPciInfo(h).busId)
        except Exception:  # noqa: BLE001 - only used to order GPUs
            pci = ""
        try:
            mig = int(nv.nvmlDeviceGetMigMode(h)[0]) == int(getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1))
        except Exception:  # noqa: BLE001 - NOT_SUPPORTED: a GPU without MIG
            mig = False
        out.append(_Phys(i, h, _text(nv.nvmlDeviceGetUUID(h)), _text(nv.nvmlDeviceGetName(h)),
                         pci, mig))
    return out


def _mig_parent(nv: Any, phys: list[_Phys], mig_uuid: str) -> _Phys | None:
    """The physical GPU of a MIG device UUID (``None`` when NVML does not know it)."""
    try:
        h = nv.nvmlDeviceGetHandleByUUID(mig_uuid)
        parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h)
        uuid = _text(nv.nvmlDeviceGetUUID(parent))
    except Exception:  # noqa: BLE001
        return None
    return next((p for p in phys if p.uuid == uuid), None)


def _gpu(k: int, p: _Phys, how: str, torch_uuid: str | None = None,
         mig: str | None = None) -> CudaGpu:
    if mig is None and p.mig_mode:
        mig = "a GPU in MIG mode (CUDA work on it runs on its MIG slices)"
    return CudaGpu(k, p.index, p.uuid, p.name, p.pci_bus_id, p.handle, how, torch_uuid, mig)


def cuda_gpus(nv: Any) -> list[CudaGpu]:
    """Each GPU this process's CUDA sees, in CUDA's order, matched to NVML by UUID.

    See the module docstring for the rules. MIG devices are listed (``mig``
    says so); whoever uses one refuses it.

    Args:
        nv: The initialised ``pynvml`` module.

    Raises:
        MeterError: when CUDA's order cannot be known (GPUs of different models,
            CUDA's default fastest-first order, CUDA not initialised), or torch
            names a device NVML does not list.
        pynvml.NVMLError: from NVML.
    """
    phys = _physical(nv)
    by_uuid = {p.uuid: p for p in phys}
    torch_uuids = torch_cuda_uuids()
    if torch_uuids is not None:
        out: list[CudaGpu] = []
        for k, raw in enumerate(torch_uuids):
            bare = raw.split("-", 1)[1] if raw.startswith(("GPU-", "MIG-")) else raw
            p = by_uuid.get(f"GPU-{bare}")
            if p is not None:
                out.append(_gpu(k, p, "torch-uuid", raw))
                continue
            parent = _mig_parent(nv, phys, f"MIG-{bare}")
            if parent is None:
                raise MeterError(f"torch's cuda:{k} has UUID {raw}, which NVML does not list "
                                 f"(NVML sees {sorted(by_uuid)}); is NVML looking at another "
                                 "driver or container than CUDA?")
            out.append(_gpu(k, parent, "torch-uuid (MIG device)", raw,
                            mig=f"MIG device MIG-{bare}"))
        return out
    order: list[_Phys] | None = sorted(phys, key=lambda p: p.pci_bus_id)
    if os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID":
        how = "pci-bus-order (CUDA_DEVICE_ORDER=PCI_BUS_ID)"
    elif len({p.name for p in phys}) <= 1:
        how = "pci-bus-order (identical GPUs: CUDA's fastest-first order is the PCI order)"
    else:
        how = ""
        order = None
    selectors = visible_gpu_selectors()
    if selectors is None:
        selectors = [str(i) for i in range(len(phys))]
    out = []
    for sel in selectors:
        k = len(out)
        if sel.startswith("MIG-"):
            parent = _mig_parent(nv, phys, sel)
            if parent is None:
                break  # CUDA ignores an invalid entry and every one after it
            out.append(_gpu(k, parent, "CUDA_VISIBLE_DEVICES names the MIG device",
                            mig=f"MIG device {sel}"))
        elif sel.isdigit():
            if order is None:
                models = sorted({p.name for p in phys})
                raise MeterError(
                    f"cannot tell which NVML GPU is CUDA's device {sel}: this host has different "
                    f"GPU models ({', '.join(models)}), CUDA numbers them fastest first and NVML "
                    "does not, and CUDA is not initialised in this process to ask it. Set "
                    "CUDA_DEVICE_ORDER=PCI_BUS_ID (then CUDA numbers GPUs by PCI bus, as ecopt "
                    "can), or name GPUs by UUID in CUDA_VISIBLE_DEVICES (nvidia-smi -L lists "
                    "them), or initialise CUDA (e.g. torch.cuda.init()) before building the meter")
            if int(sel) >= len(order):
                break
            out.append(_gpu(k, order[int(sel)], how))
        else:
            prefix = sel if sel.startswith("GPU-") else f"GPU-{sel}"
            matches = [p for p in phys if p.uuid.startswith(prefix)]
            if len(matches) != 1:
                break
            out.append(_gpu(k, matches[0], "CUDA_VISIBLE_DEVICES names the UUID"))
    return out


def device_index(device: Any) -> int | None:
    """The CUDA index of a device: ``"cuda:N"`` or ``N`` -> N, ``"cuda"`` -> the current device,
    ``"cpu"`` -> ``None``.

    ``"cuda"`` is torch's current device when this process initialised CUDA,
    else 0 (CUDA's default device).

    Raises:
        ValueError: for anything else.
    """
    if isinstance(device, bool):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or an index >= 0, got {device!r}")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"a CUDA device index must be >= 0, got {device}")
        return device
    text = str(device)
    if text == "cpu" or text.startswith("cpu:"):
        return None
    if text == "cuda":
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                return int(torch.cuda.current_device())
        except Exception:  # noqa: BLE001
            pass
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or an index >= 0, got {device!r}")


@contextlib.contextmanager
def gpu_scope(devices: Any) -> Iterator[tuple[int, ...]]:
    """Declare the CUDA devices the work inside the block uses.

    NVML meters built without ``gpus=`` meter exactly these GPUs (none for
    ``"cpu"``), and every meter waits for their queued work at both ends of a
    window. Scopes nest (the innermost holds) and are per thread and per
    asyncio task (a context variable).

    Args:
        devices: One device or a list: ``"cuda:N"``, ``"cuda"``, ``"cpu"``, an
            index, or a ``torch.device``.

    Yields:
        The CUDA indices declared (sorted).

    Raises:
        ValueError: for a malformed device.

    Example:
        >>> with ecopt.meters.gpus.gpu_scope("cuda:1"):
        ...     with trial.phase("train"):
        ...         train(model.to("cuda:1"))      # gpu:1 is metered, not every GPU
    """
    items = [devices] if isinstance(devices, (str, int)) or not isinstance(devices, Sequence) \
        else list(devices)
    found = {device_index(d) for d in items}
    idx = tuple(sorted(i for i in found if i is not None))
    token = _SCOPE.set(idx)
    try:
        yield idx
    finally:
        _SCOPE.reset(token)


def current_gpu_scope() -> tuple[int, ...] | None:
    """The CUDA devices declared by the innermost :func:`gpu_scope` (``None``: none declared)."""
    return _SCOPE.get()
