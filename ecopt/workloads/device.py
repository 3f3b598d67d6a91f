"""Where a workload runs: the device, placement, mixed precision, memory peaks and CUDA OOM.

Every workload in :mod:`ecopt.workloads` takes ``device`` (``"auto"``,
``"cpu"``, ``"cuda"`` or ``"cuda:N"``) and goes through these helpers, so each
rule has one home:

* :func:`resolve_device`: ``auto`` is ``cuda`` when torch can use a GPU, else
  ``cpu``. Asking for CUDA where there is none raises
  :class:`~ecopt.errors.DeviceUnavailableError` (naming the device and what is
  available) before any model is built.
* :func:`place_model` and :func:`to_device`: the model, and every batch, on the
  device. On CUDA a batch is copied from page-locked (pinned) host memory with
  ``non_blocking=True`` (the copy overlaps the compute queued before it);
  batches a DataLoader already pinned are not pinned again.
* :class:`Precision`: ``float32``, ``bfloat16`` or ``float16`` autocast for
  training and inference; ``float16`` trains with a gradient scaler (its
  gradients underflow otherwise).
* :func:`trial_on_device`: wraps a trial's work; declares the device as the
  trial's GPU scope (:func:`ecopt.meters.gpus.gpu_scope`: an NVML meter built
  without ``gpus=`` then meters that GPU only, none for ``cpu``, and every
  meter waits for that device's queued work at both ends of each window);
  records ``peak_host_rss_gb``
  (this process's resident memory, sampled every 10 ms) and, on CUDA,
  ``peak_device_memory_gb`` (``torch.cuda.max_memory_allocated`` since the
  trial began) even when the trial fails, and turns a CUDA out-of-memory error
  into :class:`ecopt.Infeasible`, so the study learns the region does not fit.

Example:
    >>> device = resolve_device("auto")
    >>> with trial_on_device(trial, device):
    ...     model = place_model(build(), device)
    ...     prec = Precision(trial.params.get("precision", "float32"), device)
    ...     for xb, yb in batches:
    ...         xb, yb = to_device((xb, yb), device)
    ...         with prec.autocast():
    ...             loss = loss_fn(model(xb), yb)
    ...         prec.step(loss, optimizer)
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from typing import Any

from ecopt.errors import DeviceUnavailableError, Infeasible
from ecopt.meters.gpus import gpu_scope

__all__ = ["PRECISIONS", "resolve_device", "available_devices", "is_cuda", "place_model",
           "to_device", "synchronize", "device_memory_gb", "Precision", "trial_on_device",
           "check_device"]

#: Numeric precisions the training and inference workloads understand.
PRECISIONS = ("float32", "bfloat16", "float16")


def is_cuda(device: str) -> bool:
    """Whether a resolved device string names a CUDA device."""
    return device == "cuda" or device.startswith("cuda:")


def available_devices() -> list[str]:
    """``["cpu", "cuda:0", ...]``: the devices torch can use in this process."""
    import torch

    out = ["cpu"]
    try:
        if torch.cuda.is_available():
            out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    except Exception:  # pragma: no cover - a broken driver counts as no GPU
        pass
    return out


def check_device(device: str) -> None:
    """Validate a device string's form (``auto``, ``cpu``, ``cuda``, ``cuda:N``).

    Raises:
        ValueError: for anything else.
    """
    if not isinstance(device, str) or not (
            device in ("auto", "cpu", "cuda")
            or (device.startswith("cuda:") and device[5:].isdigit())):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def resolve_device(device: str = "auto") -> str:
    """The device a workload runs on: ``auto`` -> ``cuda`` when a GPU is usable, else ``cpu``.

    Args:
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    Returns:
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises:
        ValueError: for a malformed device string.
        DeviceUnavailableError: for CUDA on a machine (or torch build) without
            it, or an index beyond the visible GPUs; raised before anything runs.
    """
    check_device(device)
    if device == "cpu":
        return "cpu"
    avail = available_devices()
    if device == "auto":
        return "cuda" if len(avail) > 1 else "cpu"
    if len(avail) == 1:
        import torch

        raise DeviceUnavailableError(
            f"device {device!r} was asked for, but torch sees no usable CUDA GPU (torch "
            f"{torch.__version__}, built for CUDA {torch.version.cuda or 'none'}, "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); available: "
            f"{avail}. Use device='cpu' or 'auto', or run on a machine with an NVIDIA GPU, its "
            "driver and a CUDA build of torch")
    if device.startswith("cuda:") and int(device[5:]) >= len(avail) - 1:
        raise DeviceUnavailableError(
            f"device {device!r} was asked for, but only {len(avail) - 1} CUDA GPU(s) are visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); available: "
            f"{avail}")
    return device


def place_model(model: Any, device: str) -> Any:
    """``model.to(device)`` (parameters and buffers); returns the model."""
    return model.to(device)


def to_device(obj: Any, device: str, pin: bool = True) -> Any:
    """Tensors (or tuples, lists, dicts of them) on ``device``.

    On CUDA a CPU tensor is copied from pinned memory with ``non_blocking=True``
    (pinned here unless a DataLoader already pinned it); with ``pin=False`` it is
    a plain blocking copy. On CPU, CPU tensors are returned as they are.
    Non-tensors pass through.
    """
    import torch

    if isinstance(obj, torch.Tensor):
        if not is_cuda(device):
            return obj if obj.device.type == device else obj.to(device)
        index = torch.cuda.current_device() if device == "cuda" else int(device[5:])
        if obj.device.type == "cuda" and obj.device.index == index:
            return obj
        if obj.device.type == "cpu" and pin:
            src = obj if obj.is_pinned() else obj.pin_memory()
            return src.to(device, non_blocking=True)
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(to_device(o, device, pin) for o in obj)
    if isinstance(obj, list):
        return [to_device(o, device, pin) for o in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device, pin) for k, v in obj.items()}
    return obj


def synchronize(device: str) -> None:
    """Wait for the work queued on a CUDA device (no-op on CPU)."""
    if is_cuda(device):
        import torch

        torch.cuda.synchronize(device)


def device_memory_gb(device: str) -> float | None:
    """Total memory of a CUDA device in GB (``None`` on CPU)."""
    if not is_cuda(device):
        return None
    import torch

    return float(torch.cuda.get_device_properties(device).total_memory) / 1e9


class Precision:
    """Autocast to ``float32`` (off), ``bfloat16`` or ``float16``, with a gradient scaler for ``float16``.

    Args:
        name: One of :data:`PRECISIONS`.
        device: The resolved device (``cpu`` or ``cuda[:N]``).

    Raises:
        ValueError: for an unknown precision.

    Example:
        >>> prec = Precision("bfloat16", "cuda")
        >>> with prec.autocast():
        ...     loss = loss_fn(model(x), y)
        >>> prec.step(loss, optimizer)
    """

    def __init__(self, name: str = "float32", device: str = "cpu") -> None:
        if name not in PRECISIONS:
            raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {name!r}")
        import torch

        self.name = name
        self.device = device
        self.device_type = "cuda" if is_cuda(device) else "cpu"
        self.dtype = getattr(torch, name)
        self.scaler = torch.amp.GradScaler(self.device_type, enabled=name == "float16")

    def __repr__(self) -> str:
        return f"Precision({self.name!r}, {self.device!r})"

    def autocast(self) -> Any:
        """The autocast context (a no-op for ``float32``)."""
        if self.name == "float32":
            return contextlib.nullcontext()
        import torch

        return torch.autocast(self.device_type, dtype=self.dtype)

    def step(self, loss: Any, optimizer: Any) -> None:
        """Backward pass and optimiser step (scaled for ``float16``)."""
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()


def _oom_types() -> tuple[type[BaseException], ...]:
    import torch

    out: list[type[BaseException]] = []
    for owner, name in ((torch, "OutOfMemoryError"), (torch.cuda, "OutOfMemoryError")):
        t = getattr(owner, name, None)
        if isinstance(t, type) and issubclass(t, BaseException):
            out.append(t)
    return tuple(out)


@contextlib.contextmanager
def trial_on_device(trial: Any, device: str, rss_period_s: float = 0.01) -> Iterator[None]:
    """Run a trial's work on ``device``: memory peaks recorded, CUDA OOM made infeasible.

    Records (with ``trial.set_metric``, also when the work raises):

    * ``peak_host_rss_gb``: the peak resident set size of this process while
      the block ran (sampled; includes the interpreter and libraries; DataLoader
      worker processes are not included),
    * ``peak_device_memory_gb`` (CUDA only): ``torch.cuda.max_memory_allocated``
      since the block began (the peak statistics are reset on entry),

    and the user attribute ``device``. The block runs in ``gpu_scope(device)``:
    the study's NVML meter (when built without ``gpus=``) meters this device
    only (no GPU on ``cpu``). A ``torch.cuda.OutOfMemoryError`` inside
    the block frees the cached blocks and is raised again as
    :class:`ecopt.Infeasible` with the device, the peak reached and torch's
    message, so the study records the trial as infeasible.
    """
    import torch

    from ecopt.data.memory import PeakRSS

    cuda = is_cuda(device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    trial.set_user_attr("device", device)
    if cuda:
        trial.set_user_attr("device_name", torch.cuda.get_device_name(device))
    rss = PeakRSS(rss_period_s)
    rss.__enter__()
    oom: str | None = None
    try:
        with gpu_scope(device):
            yield
    except _oom_types() as exc:
        if not cuda:
            raise
        # Keep only the text: the exception's traceback holds the frames (and their
        # tensors) that ran out of memory, which must be freed before the next trial.
        oom = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        del exc
    finally:
        rss.__exit__(None, None, None)
        trial.set_metric("peak_host_rss_gb", rss.peak_bytes / 1e9)
        if cuda:
            trial.set_metric("peak_device_memory_gb",
                             torch.cuda.max_memory_allocated(device) / 1e9)
    if oom is not None:
        peak = trial.metrics.get("peak_device_memory_gb", float("nan"))
        total = device_memory_gb(device)
        gc.collect()
        torch.cuda.empty_cache()
        raise Infeasible(f"CUDA out of memory on {device} (peak {peak:.3g} GB allocated of "
                         f"{total:.3g} GB): {oom}")
