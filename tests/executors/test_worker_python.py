"""Workers run the driver's Python, however the user started it.

Each test runs a study in a subprocess as a user with ecopt installed in a
virtual environment runs it from a notebook kernel, a cron job or an IDE: the
environment's interpreter called by its path, its ``bin/`` not on ``PATH``, no
``PYTHONPATH``, a working directory outside the checkout. The ``python3`` on
``PATH`` is another Python without ecopt (a system Python), so workers that
ran ``python3`` instead of the driver's interpreter would fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from executor_helpers import no_ecopt_python

CHECKOUT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("worker_python_study.py")


def run_as_user(tmp_path: Path, executor: str, *extra: str) -> dict[str, Any]:
    """Run worker_python_study.py the way a user without an activated venv does."""
    shims = tmp_path / "bin"
    shims.mkdir()
    for name in ("python3", "python"):
        no_ecopt_python(shims / name)
    venv_bin = os.path.realpath(os.path.dirname(sys.executable))
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and os.path.realpath(d) != venv_bin]
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = os.pathsep.join([str(shims), *path])
    cwd = tmp_path / "work"
    cwd.mkdir()
    assert not str(cwd).startswith(str(CHECKOUT))
    # The shim really lacks ecopt (else this test could not fail).
    probe = subprocess.run(["python3", "-c", "import ecopt"], env=env, cwd=cwd,
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'ecopt'" in probe.stderr
    proc = subprocess.run([sys.executable, str(SCRIPT), str(CHECKOUT), executor, *extra],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=540)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(lines[-1][len("RESULT "):])  # type: ignore[no-any-return]


def assert_driver_python_ran_all(result: dict[str, Any]) -> None:
    recs = result["records"]
    assert [r["state"] for r in recs] == ["complete"] * 6, recs
    assert {r["python"] for r in recs} == {sys.executable}
    assert {r["ecopt"] for r in recs} == {str(CHECKOUT / "ecopt" / "__init__.py")}


@pytest.mark.slow
def test_spark_workers_run_the_drivers_python(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    result = run_as_user(tmp_path, "spark")
    assert_driver_python_ran_all(result)
    assert all(r["worker"].startswith("executor ") for r in result["records"])


@pytest.mark.slow
def test_dask_workers_run_the_drivers_python(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    result = run_as_user(tmp_path, "dask")
    assert_driver_python_ran_all(result)
    assert all("tcp://127.0.0.1:" in r["worker"] for r in result["records"])


@pytest.mark.slow
def test_ray_workers_run_the_drivers_python(tmp_path: Path) -> None:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install 'ecopt[ray]')")
    result = run_as_user(tmp_path, "ray")
    assert_driver_python_ran_all(result)
    assert all(r["worker"].startswith("ray node ") for r in result["records"])
