"""scripts/gpu_check.py on CPU: the whole dry run, section isolation, the budget and the watchdog."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _load():
    spec = importlib.util.spec_from_file_location("_gpu_check_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


@pytest.fixture
def keep_torch_threads():
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.mark.slow
def test_dry_run_exercises_every_section(tmp_path):
    """The exact command a CI job runs; on 2 busy cores it takes ~30 s."""
    out = tmp_path / "check"
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out)],
                         capture_output=True, text=True, timeout=170, env=ENV, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert time.monotonic() - t0 < 170
    r = _summary(out)
    assert r["status"] == "finished" and r["dry_run"] is True
    assert r["energy"]["measured"] is False and "FAKE" in r["machine"]
    assert r["command"] == f"python scripts/gpu_check.py --dry-run --out {out}"
    assert r["git_commit"] and r["versions"]["torch"]
    sec = r["sections"]
    assert list(sec) == ["environment", "idle", "counter_vs_power", "repeatability",
                         "counter_resolution", "power_limits", "gemma_batch", "nas_cnn"]
    assert all(e["status"] == "ok" for e in sec.values()), {k: e.get("error")
                                                             for k, e in sec.items()}
    get = {k: e["result"] for k, e in sec.items()}
    assert get["environment"]["nvml_name"] == "Fake GPU (dry run)"
    # The fake draws a constant 250 W: counter and sampled power must both see it.
    assert get["idle"]["power_w_sampled"] == pytest.approx(250, rel=0.01)
    assert get["idle"]["power_w_counter"] == pytest.approx(250, rel=0.25)
    assert abs(get["counter_vs_power"]["sampled_minus_counter_pct"]) < 25
    assert get["repeatability"]["repeats"] == 5 and get["repeatability"]["energy_cv"] >= 0
    res_ = get["counter_resolution"]
    assert res_["update_period_s"] == pytest.approx(0.02, rel=0.5)  # the fake's refresh
    assert [w["window_s"] for w in res_["windows"]] == [0.4, 0.2, 0.1, 0.05, 0.02]
    pl = get["power_limits"]
    assert pl["permitted"] and pl["restored"] and pl["range_w"] == [100.0, 350.0]
    assert [row["limit_w"] for row in pl["limits"]] == [100.0, 225, 350.0]
    # Under a 100 W cap the fake draws 100 W; above its 250 W draw the cap does nothing.
    assert pl["limits"][0]["power_w"] == pytest.approx(100, rel=0.3)
    assert pl["limits"][2]["power_w"] == pytest.approx(250, rel=0.3)
    assert json.loads((out / "power-limit-state.json").read_text())["entries"] == {}
    gb = get["gemma_batch"]
    assert gb["optimiser_evaluations"] == 10 and gb["grid_evaluations"] == 4
    assert gb["infeasible"]["grid"] == 1  # batch 4096, over the emulated ceiling
    assert gb["smallest_infeasible_batch"] is None or \
        gb["smallest_infeasible_batch"] > gb["largest_feasible_batch"]
    assert isinstance(gb["within_5pct_of_grid_best"], bool)
    assert gb["payback_tokens"] > 0 and gb["tokens_for_search_energy"] > 0
    assert (out / "gemma_batch" / "optimiser" / "trials.jsonl").exists()
    nas = get["nas_cnn"]
    assert nas["trials"] == 3 and nas["devices_seen"] == ["cpu"]
    md = (out / "summary.md").read_text()
    assert "DRY RUN" in md and "## Checks" in md and "optimiser best / grid best" in md


def test_a_broken_section_never_loses_the_others(tmp_path, monkeypatch, keep_torch_threads):
    gc = _load()

    def broken(ck, deadline):
        raise RuntimeError("the driver went away")

    monkeypatch.setitem(gc.SECTION_FUNCS, "idle", broken)
    out = tmp_path / "c"
    rc = gc.main(["--dry-run", "--out", str(out), "--sections",
                  "environment,idle,repeatability"])
    assert rc == 1
    sec = _summary(out)["sections"]
    assert sec["idle"]["status"] == "error"
    assert sec["idle"]["error"] == "RuntimeError: the driver went away"
    assert "Traceback" in sec["idle"]["traceback"]
    assert sec["environment"]["status"] == "ok" and sec["repeatability"]["status"] == "ok"
    assert "| idle | error |" in (out / "summary.md").read_text()


def test_sections_that_no_longer_fit_are_skipped_and_recorded(tmp_path, keep_torch_threads):
    gc = _load()
    out = tmp_path / "c"
    rc = gc.main(["--dry-run", "--out", str(out), "--budget-s", "5",
                  "--sections", "idle,gemma_batch"])
    assert rc == 0
    r = _summary(out)
    assert r["sections"]["idle"]["status"] == "ok"
    assert r["sections"]["gemma_batch"]["status"] == "skipped"
    assert "time budget" in r["sections"]["gemma_batch"]["reason"]
    assert r["status"] == "finished"


@pytest.mark.slow
def test_the_watchdog_saves_restores_and_exits(tmp_path):
    """A section that hangs while holding a power limit: the watchdog must save the partial
    results, restore the limit from the state file and end the process."""
    out = tmp_path / "c"
    code = textwrap.dedent(f"""
        import importlib.util, sys, time
        spec = importlib.util.spec_from_file_location("gc", {str(SCRIPT)!r})
        gc = importlib.util.module_from_spec(spec); spec.loader.exec_module(gc)

        def hang(ck, deadline):
            from ecopt.meters.power_limit import gpu_power_limit
            with gpu_power_limit(150, gpus=[0], state_path=ck.out / "power-limit-state.json"):
                time.sleep(60)

        gc.SECTIONS = (("environment", 0.01, 0.01), ("power_limits", 1.0, 0.01))
        gc.SECTION_FUNCS["power_limits"] = hang
        sys.exit(gc.main(["--dry-run", "--out", {str(out)!r}, "--budget-s", "12",
                          "--grace-s", "1"]))
    """)
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=ENV)
    assert res.returncode == 3, res.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    r = _summary(out)
    assert r["status"].startswith("stopped by the watchdog")
    assert r["sections"]["environment"]["status"] == "ok"
    assert r["sections"]["power_limits"]["status"] == "aborted"
    assert json.loads((out / "power-limit-state.json").read_text())["entries"] == {}


def test_real_mode_without_cuda_says_so(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    gc = _load()
    out = tmp_path / "c"
    assert gc.main(["--out", str(out)]) == 2
    assert _summary(out)["status"].startswith("no CUDA")
    with pytest.raises(SystemExit, match="unknown"):
        gc.main(["--out", str(out), "--sections", "idle,nope"])
