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
    env = get["environment"]
    assert env["nvml_name"] == "Fake GPU (dry run)" and env["instant_power_field"] is True
    assert env["cuda_to_nvml"]["uuid"] == env["nvml_uuid"]
    # The fake draws a constant 250 W: tick-aligned counter windows and sampled power see it.
    assert get["idle"]["power_w_sampled"] == pytest.approx(250, rel=0.01)
    assert get["idle"]["power_w_counter"] == pytest.approx(250, rel=0.02)
    cvp = get["counter_vs_power"]
    assert abs(cvp["sampled_minus_counter_pct"]) < 5 and cvp["warm_matmuls"] > 0
    assert get["repeatability"]["repeats"] == 5 and get["repeatability"]["energy_cv"] >= 0
    res_ = get["counter_resolution"]
    assert res_["update_period_s"] == pytest.approx(0.02, rel=0.2)  # the fake's refresh
    assert res_["meter_measured_period_s"] == pytest.approx(0.02, rel=0.2)
    assert res_["steady_reference_s"] >= 0.6 and res_["steady_power_w"] == pytest.approx(250,
                                                                                        rel=0.02)
    assert [w["window_s"] for w in res_["windows"]] == [0.4, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005]
    for w in res_["windows"]:  # as the meter timed them: sub-period ones at instant power
        if w["meter_duration_s"] < res_["meter_measured_period_s"]:
            assert "nvml-instant-power" in w["meter_sources"]
    pl = get["power_limits"]
    assert pl["permitted"] and pl["restored"] and pl["range_w"] == [100.0, 350.0]
    assert [row["limit_w"] for row in pl["limits"]] == [100.0, 225, 350.0]
    assert [row["enforced_w"] for row in pl["limits"]] == [100.0, 225, 350.0]
    # Under a 100 W cap the fake draws 100 W; above its 250 W draw the cap does nothing.
    assert pl["limits"][0]["power_w"] == pytest.approx(100, rel=0.05)
    assert pl["limits"][2]["power_w"] == pytest.approx(250, rel=0.05)
    assert json.loads((out / "power-limit-state.json").read_text())["entries"] == {}
    gb = get["gemma_batch"]
    assert gb["grid_evaluations"] == 4 and gb["grid_cut"] == [] and gb["optimiser_evaluations"] == 10
    assert gb["infeasible"]["grid"] == 1  # batch 4096, over the emulated ceiling
    assert gb["smallest_infeasible_batch"] > gb["largest_feasible_batch"]
    assert gb["best_fraction_of_grid_best"] > 0 and gb["payback_tokens"] > 0
    assert gb["grid_energy_j"] > 0 and gb["optimiser_energy_j"] > 0
    to = gb["optimiser_energy_to_grid_best_j"]
    assert to is None or 0 < to <= gb["optimiser_energy_j"]
    # Issue 30 finding 8: the grid runs before the optimiser (its best is the yardstick).
    first = [json.loads((out / "gemma_batch" / d / "trials.jsonl").read_text().splitlines()[0])
             for d in ("grid_run/grid", "optimiser_run/optimiser")]
    assert first[0]["started_at"] < first[1]["started_at"]
    nas = get["nas_cnn"]
    assert nas["trials"] == 3 and nas["devices_seen"] == ["cpu"]
    md = (out / "summary.md").read_text()
    assert "DRY RUN" in md and "## Checks" in md and "| verdict | pass line |" in md
    verdict = {row[0]: row[2] for row in gc_module().verdicts(r)}
    assert verdict["gemma_batch: optimiser best / grid best tokens/J"] in ("pass", "FAIL")
    energy_row = "gemma_batch: optimiser's energy to the grid's best vs the grid's energy"
    assert verdict[energy_row] in ("pass", "FAIL", "FAIL: the optimiser never reached the "
                                   "grid's best")
    assert verdict["power limits set, enforced as requested and restored"] == "pass"
    assert verdict["nas_cnn trials ran on the GPU"].startswith("not applicable")


def gc_module():
    return _load()


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


# -- issue 30 finding 8: verdicts that mean something -----------------------------------------

def _check(gc, tmp_path, *extra):
    args = gc._parser().parse_args(["--dry-run", "--out", str(tmp_path / "c"), *extra])
    return gc.Check(args, [])


def test_comparison_windows_are_warm_and_sample_instant_power(fake_nvml, hw, tmp_path,
                                                              monkeypatch, keep_torch_threads):
    """From idle, the 1 s averaged power lags the counter: the old check compared them cold."""
    gc = _load()
    nv = fake_nvml([hw.FakeGpu(live=True, counter_period_s=0.02, power_mw=60_000)])
    real_init = gc.MatmulLoad.__init__

    def load_starts(self, *a, **k):  # the GPU goes from idle to 300 W when the load starts
        nv.gpus[0].power_mw = 300_000
        real_init(self, *a, **k)

    monkeypatch.setattr(gc.MatmulLoad, "__init__", load_starts)
    ck = _check(gc, tmp_path)
    r = gc.sec_counter_vs_power(ck, time.monotonic() + 30)
    assert r["warm_matmuls"] > 0 and abs(r["sampled_minus_counter_pct"]) < 5
    assert "instant" in r["sampled_reading"]
    assert r["power_w_counter"] == pytest.approx(300, rel=0.03)


def test_aligned_windows_carry_no_tick_rounding(fake_nvml, hw, tmp_path, monkeypatch,
                                                keep_torch_threads):
    """A coarse 0.1 s counter: unaligned windows of 0.2-0.4 s would be off by 25-50%; aligned
    ones only by the time between two reads at each edge (a few ms here, even under load)."""
    gc = _load()
    fake_nvml([hw.FakeGpu(live=True, counter_period_s=0.1, power_mw=250_000)])
    monkeypatch.setattr(gc.MatmulLoad, "run", lambda self, count: time.sleep(0.002 * count))
    ck = _check(gc, tmp_path)
    load, counter = gc.MatmulLoad("cpu", 8), gc.Counter(0)
    for _ in range(3):
        w = counter.aligned(load, 0.4, time.monotonic() + 10)
        assert w["power_w"] == pytest.approx(250, rel=0.06) and w["seconds"] >= 0.4
    r = gc.sec_repeatability(ck, time.monotonic() + 30)
    assert r["repeats"] == 5 and all(x["power_w"] == pytest.approx(250, rel=0.1)
                                     for x in r["runs"])


def test_power_limit_verdicts_read_the_enforced_limit(fake_nvml, hw, tmp_path, keep_torch_threads):
    gc = _load()
    nv = fake_nvml([hw.FakeGpu(live=True, counter_period_s=0.01, power_mw=250_000,
                               power_limit_mw=300_000, min_limit_mw=100_000, max_limit_mw=350_000,
                               external_cap_mw=200_000)])  # e.g. a node power manager
    ck = _check(gc, tmp_path)
    r = gc.sec_power_limits(ck, time.monotonic() + 30)
    assert [x["requested_read_back_w"] for x in r["limits"]] == [100.0, 225, 350.0]
    assert [x["enforced_w"] for x in r["limits"]] == [100.0, 200.0, 200.0]
    assert r["restored"] and r["enforced_as_requested"] is False
    assert nv.gpus[0].power_limit_mw == 300_000
    results = {"sections": {"power_limits": {"status": "ok", "result": r}}}
    row = next(x for x in gc.verdicts(results) if x[0].startswith("power limits"))
    assert row[2] == "FAIL" and "225->200 W" in row[1]
    # A board without power-limit support is its own verdict, not an error.
    fake_nvml([hw.FakeGpu(limit_supported=False)])
    r = gc.sec_power_limits(ck, time.monotonic() + 30)
    results = {"sections": {"power_limits": {"status": "ok", "result": r}}}
    assert next(x for x in gc.verdicts(results) if x[0].startswith("power limits"))[2] == \
        "not supported"


def test_a_cut_grid_makes_the_batch_verdict_not_applicable():
    gc = _load()
    g = {"grid": [1, 8, 64, 512], "grid_cut": [512], "best_fraction_of_grid_best": 1.3}
    results = {"sections": {"gemma_batch": {"status": "ok", "result": g}}}
    row = next(x for x in gc.verdicts(results) if x[0].startswith("gemma_batch"))
    assert row[2].startswith("not applicable: the grid was cut") and "[512]" in row[2]
    g["grid_cut"] = []
    assert next(x for x in gc.verdicts(results) if x[0].startswith("gemma_batch"))[2] == "pass"
    missing = next(x for x in gc.verdicts({"sections": {}}) if x[0].startswith("gemma_batch"))
    assert missing[2] == "not run: not in this run"


def test_environment_puts_torchs_device_uuid_beside_nvmls(fake_nvml, hw, tmp_path, monkeypatch):
    gc = _load()
    nv = fake_nvml([hw.FakeGpu(uuid="GPU-12345678-0000-0000-0000-000000000000")])
    hw.FakeCuda(nv.gpus).install(monkeypatch)
    ck = _check(gc, tmp_path)
    ck.device = "cuda:0"
    r = gc.sec_environment(ck, time.monotonic() + 10)
    assert r["torch_uuid"] == "12345678-0000-0000-0000-000000000000"
    assert r["nvml_uuid"] == "GPU-12345678-0000-0000-0000-000000000000" and r["uuids_match"]
    assert r["cuda_to_nvml"]["mapped_by"] == "torch-uuid"


def test_dry_run_on_an_amd_gpu_through_zeus(tmp_path, keep_torch_threads):
    """--vendor amd: the same sections read the fake amdsmi through Zeus's real AMD layer."""
    pytest.importorskip("zeus.device")
    gc = _load()
    out = tmp_path / "amd"
    rc = gc.main(["--dry-run", "--vendor", "amd", "--out", str(out), "--sections",
                  "environment,idle,counter_resolution,power_limits"])
    assert rc == 0
    r = _summary(out)
    assert r["vendor"] == "amd" and "Fake AMD GPU (dry run)" in r["machine"]
    sec = {k: e["result"] for k, e in r["sections"].items()}
    env = sec["environment"]
    assert env["amd"]["method"] == "energy-counter" and env["amd"]["via"].startswith("zeus")
    assert env["meters"]["amd"]["available"] is True
    assert env["power_limit_max_w"] == 750.0
    # The fake draws a constant 250 W: Zeus's counter and the sampling meter see it.
    assert sec["idle"]["power_w_counter"] == pytest.approx(250, rel=0.05)
    assert sec["idle"]["power_w_sampled"] == pytest.approx(250, rel=0.05)
    res_ = sec["counter_resolution"]
    assert res_["update_period_s"] == pytest.approx(0.02, rel=0.3)
    for w in res_["windows"]:
        if "skipped" not in w and w["meter_duration_s"] < res_["meter_measured_period_s"]:
            assert "amd-instant-power" in w["meter_sources"]
    assert sec["power_limits"]["supported"] is False
    verdict = {row[0]: row[2] for row in gc.verdicts(r)}
    assert verdict["power limits set, enforced as requested and restored"] == "not supported"


def test_the_search_energy_verdict_counts_trials_and_proposals_up_to_the_grids_best():
    gc = _load()

    def rec(n, tpj, j, search_j=None):
        r = {"number": n, "state": "complete", "values": {"tokens_per_joule": tpj},
             "energy_j": j}
        if search_j is not None:
            r["proposal"] = {"search": {"energy_j": search_j}}
        return r

    def tpj(r):
        return r["values"]["tokens_per_joule"]

    opt = [rec(0, 10.0, 100.0), rec(2, 96.0, 50.0, 5.0), rec(1, 40.0, 100.0, 5.0),
           rec(3, 120.0, 10.0, 5.0)]
    gb = gc._load_experiment("gemma_batch")  # what gpu_check's section calls
    assert gb.search_energy_j(opt) == pytest.approx(275.0)
    assert gb.search_energy_j([{"number": 0, "state": "failed"}]) is None
    # In trial order: 100 + (100 + 5) + (50 + 5) when trial 2 reaches 0.95 x 100.
    assert gb.search_energy_to_j(opt, 95.0, tpj) == pytest.approx(260.0)
    assert gb.search_energy_to_j(opt, 200.0, tpj) is None
    assert gb.search_energy_to_j(opt, None, tpj) is None
    g = {"grid": [1, 8], "grid_cut": [], "best_fraction_of_grid_best": 1.2,
         "grid_energy_j": 300.0, "optimiser_energy_to_grid_best_j": 260.0}
    results = {"sections": {"gemma_batch": {"status": "ok", "result": g}}}

    def row():
        return next(x for x in gc.verdicts(results) if x[0].startswith("gemma_batch: optimiser's"))

    assert row()[2] == "pass" and row()[1] == "260 J vs 300 J"
    g["grid_energy_j"] = 200.0
    assert row()[2] == "FAIL"
    g["optimiser_energy_to_grid_best_j"] = None
    assert row()[2].startswith("FAIL: the optimiser never reached")
    g["grid_cut"] = [8]
    assert row()[2].startswith("not applicable")
