"""Shared fixtures. Every test runs without a GPU; hardware is faked at the lowest layer."""

from __future__ import annotations

import json
import os
import sys

import pytest

# The helpers of this folder (fake_meters) are importable (tests run with --import-mode=importlib).
_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

# Zeus binds pynvml (and amdsmi) when its device layer is first imported: import it now, with
# the real modules, before any test installs a fake pynvml in sys.modules (the fakes reach Zeus
# through fixtures that patch its module attributes).
try:
    import zeus.device  # noqa: F401
except ImportError:  # pragma: no cover - the zeus extra is not installed
    pass

# Keep BLAS/torch from oversubscribing the 2-core CI machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _torch_threads() -> None:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _restore_ecopt_log_level():
    """Scripts run in-process (benchmarks, experiments) quieten the "ecopt" logger; undo it."""
    import logging

    logger = logging.getLogger("ecopt")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture
def run_dir(tmp_path):
    """A fresh study directory path (not created)."""
    return tmp_path / "study"


@pytest.fixture
def fixed_joules_meter():
    """A meter class reading 2 J per window (:class:`fake_meters.FixedJoules`)."""
    from fake_meters import FixedJoules

    return FixedJoules


@pytest.fixture
def this_python_kernel(tmp_path, monkeypatch) -> str:
    """A kernelspec that runs this very interpreter (the venv's), whatever else is installed.

    Returns the kernel name for ``nbclient.NotebookClient(kernel_name=...)``.
    """
    spec_dir = tmp_path / "jupyter" / "kernels" / "ecopt-test"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "ecopt test", "language": "python",
        "env": {"OMP_NUM_THREADS": "1"},
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "ecopt-test"
