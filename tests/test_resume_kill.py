"""Kill -9 a study mid-run, re-open it: nothing finished is lost, numbering continues."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import ecopt

SCRIPT = textwrap.dedent("""
    import sys, time, ecopt
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
    study = ecopt.Study(space, [ecopt.Objective("a", "max"), ecopt.Objective("b", "min")],
                        storage=sys.argv[1], sampler="random", meter="estimate", seed=5)
    def f(t):
        with t.phase("work"):
            time.sleep(0.05)
        if t.number == 4:
            print("STUCK", flush=True)
            time.sleep(600)          # the parent kills us here, mid-trial
        return {"a": t["x"], "b": t["y"]}
    study.optimize(f, n_trials=50)
""")


@pytest.mark.slow
def test_kill_9_mid_study_then_resume(tmp_path):
    run_dir = tmp_path / "study"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(run_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        line = ""
        while time.time() < deadline:
            line = proc.stdout.readline()
            if "STUCK" in line or proc.poll() is not None:
                break
        assert "STUCK" in line, proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = (run_dir / "trials.jsonl").read_text().splitlines()
    assert [json.loads(x)["number"] for x in lines] == [0, 1, 2, 3]

    # Re-open for writing: trial 4 is recorded as interrupted, numbering continues at 5.
    study = ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}),
                        [ecopt.Objective("a", "max"), ecopt.Objective("b", "min")],
                        storage=run_dir, sampler="random", meter="estimate", seed=5)
    recs = study.records
    assert [r.number for r in recs] == [0, 1, 2, 3, 4]
    assert recs[4].state is ecopt.TrialState.FAILED and recs[4].interrupted
    assert "killed or crashed" in recs[4].error.message
    new = study.optimize(lambda t: {"a": t["x"], "b": t["y"]}, n_trials=2)
    assert [r.number for r in new] == [5, 6]
    study.close()
    # The lock died with the killed process; a reader sees all seven.
    assert len(ecopt.load_study(run_dir).records) == 7
