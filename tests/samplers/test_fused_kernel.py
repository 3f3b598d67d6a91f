"""BoTorch's fused qLogNEHVI kernel is not JIT-compiled on the first proposal (issue 25 item 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ecopt.samplers._botorch_compat import FUSED_VARIABLE, fused_kernel_policy

SCRIPT = """
import json, ecopt
from ecopt.samplers import QLogNEHVISampler
space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
s = ecopt.Study(space, [ecopt.Objective("a", "min"), ecopt.Objective("b", "min")],
                sampler=QLogNEHVISampler(n_init=2, num_restarts=2, raw_samples=32),
                seed=0, meter="wallclock")
recs = s.optimize(lambda t: {"a": t["x"], "b": 1 - t["x"] + t["y"]}, n_trials=3,
                  show_progress=False)
import botorch.acquisition.multi_objective.logei as L
print(json.dumps({"by": [r.proposed_by for r in recs],
                  "kernel": recs[-1].proposal.get("fused_kernel"), "C": getattr(L, "_C", None) is not None}))
"""


def test_first_proposal_compiles_nothing(tmp_path):
    ext = tmp_path / "torch_extensions"
    ext.mkdir()
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext)}
    env.pop(FUSED_VARIABLE, None)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["by"][-1] == "qlognehvi"
    # "absent": a BoTorch older than its fused kernel (the floor, 0.15) has nothing to compile.
    assert got["kernel"] in ("off", "absent") and not got["C"]
    assert list(ext.iterdir()) == []  # BoTorch would have built logei_fused_ext here


def test_bad_variable_value():
    with pytest.raises(ValueError, match="ECOPT_FUSED_KERNEL must be unset or 'compile'"):
        fused_kernel_policy("yes")
    assert fused_kernel_policy("compile") in ("botorch", "absent")
