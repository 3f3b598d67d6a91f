"""kill -9 at random points, again and again: every trial reported saved survives."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

import ecopt

DRIVER = textwrap.dedent("""
    import random, sys, time
    sys.path.insert(0, {here!r})
    from faults_helpers import make_study

    def objective(trial):
        rng = random.Random(trial.number)
        for step in range(1, 4):
            with trial.phase("train", samples=8):
                end = time.perf_counter() + rng.uniform(0.0, 0.02)
                while time.perf_counter() < end:
                    pass
            trial.report(step, {{"f1": float(trial["x"]) + 1.0 / step}})
        return {{"f1": float(trial["x"]), "f2": float(trial["y"])}}

    def saved(study, rec):
        print("SAVED", rec.number, rec.values["f1"], rec.values["f2"], flush=True)

    st = make_study({path!r}, seed=None)
    print("OPEN", flush=True)
    st.optimize(objective, n_trials=10_000, show_progress=False, callbacks=[saved])
""")


@pytest.mark.slow
def test_kill_9_loop_at_random_points(tmp_path):
    run_dir = tmp_path / "study"
    script = DRIVER.format(here=str(Path(__file__).parent), path=str(run_dir))
    rng = random.Random(1234)
    saved: dict[int, tuple[float, float]] = {}
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            assert line.strip() == "OPEN", proc.stderr.read()
            lines: list[str] = []
            reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
            reader.start()
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
            reader.join(30)
        finally:
            if proc.poll() is None:
                proc.kill()
        buf = "".join(lines)
        # whole lines only (ended by a newline): the kill can cut the last one mid-write
        for ln in buf.split("\n")[:-1]:
            if ln.startswith("SAVED"):  # a whole line: the callback ran after the save
                _, n, f1, f2 = ln.split()
                saved[int(n)] = (float(f1), float(f2))
    assert len(saved) > 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = ecopt.load_study(run_dir)
    on_disk = {r.number: r for r in st.records}
    for n, (f1, f2) in saved.items():
        assert n in on_disk and on_disk[n].values == {"f1": f1, "f2": f2}
    # Re-opening for writing records every killed trial, keeping its curve.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from faults_helpers import make_study

        st = make_study(run_dir, seed=None)
    numbers = [r.number for r in st.records]
    assert len(numbers) == len(set(numbers))
    killed = [r for r in st.records if r.interrupted]
    assert killed and all(r.number not in saved for r in killed)
    lines = (run_dir / "trials.jsonl").read_text().splitlines()
    good = 0
    for ln in lines:
        try:
            json.loads(ln)
            good += 1
        except ValueError:
            pass
    assert good >= len(saved)
    st.close()
