"""``import ecopt.data`` stays light: no torch, polars, dask or PIL until used."""

from __future__ import annotations

import subprocess
import sys


def test_importing_ecopt_data_loads_no_heavy_library():
    code = ("import sys, ecopt, ecopt.data; from ecopt.data import LoaderConfig, INSURANCE; "
            "print(sorted(m for m in ('torch', 'polars', 'dask', 'PIL', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
