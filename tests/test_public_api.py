"""The public surface is what we mean, and `import ecopt` stays light."""

from __future__ import annotations

import subprocess
import sys

import ecopt

EXPECTED = {
    "__version__", "SearchSpace", "Float", "Int", "Categorical", "Fixed", "Objective",
    "Constraint", "Study", "load_study", "Trial", "TrialRecord", "TrialState", "Sampler", "Meter",
    "Measurement", "EcoptError", "ExecutorLostError", "Infeasible", "MeterError", "MeterUnavailableError",
    "NotAStudyError", "SpecMismatchError", "StudyLockedError", "SystematicFailureError", "TransferSourceError",
    "TrialPruned", "Intermediate",
    "DaskExecutor", "pareto", "samplers", "meters", "plot", "pruners", "StoppingRule", "Termination",
    "StopWhenConverged", "OptimizeCallback", "registry", "callbacks",
}


def test_all_is_the_contract():
    assert set(ecopt.__all__) == EXPECTED
    for name in ecopt.__all__:
        assert getattr(ecopt, name) is not None, name


def test_import_is_light():
    code = ("import sys, ecopt; heavy = [m for m in ('torch', 'botorch', 'matplotlib', 'pandas', "
            "'dask', 'polars', 'transformers', 'codecarbon', 'pynvml', 'scipy', 'mlflow', "
            "'lightning', 'pytorch_lightning', 'starlette', 'uvicorn', 'plotly', 'accelerate', "
            "'ray', 'pyspark') "
            "if m in sys.modules];"
            " print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"import ecopt pulled in: {out.stdout.strip()}"


def test_cli_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "ecopt.cli", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    for cmd in ("quickstart", "meters", "report", "plot", "compare", "show", "profile",
                "dashboard"):
        assert cmd in out.stdout


def test_integrations_are_imported_only_when_used():
    code = ("import sys, ecopt, ecopt.integrations, ecopt.executors; "
            "heavy = [m for m in ('transformers', 'lightning', 'mlflow', 'starlette', 'plotly', "
            "'torch', 'ray') if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"ecopt.integrations pulled in: {out.stdout.strip()}"
