"""GPU power limit through NVML (ecopt.meters.power_limit) against the fake pynvml.

Processes that hold a limit and die (os._exit, SIGTERM, SIGHUP) are real child
processes; their fake GPU logs every limit set to a file the test reads.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ecopt
from ecopt.errors import PowerLimitError
from ecopt.meters.power_limit import (
    PowerLimitObjective,
    default_state_path,
    gpu_power_limit,
    power_limit_range,
    restore_stale_power_limits,
)

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
UUID0 = "GPU-00000000-0000-0000-0000-000000000000"
UUID1 = "GPU-11111111-1111-1111-1111-111111111111"


def _entries(path: Path) -> dict:
    return json.loads(path.read_text())["entries"] if path.exists() else {}


def test_range_is_the_intersection_of_the_gpus(fake_nvml, hw):
    fake_nvml([hw.FakeGpu(min_limit_mw=100_000, max_limit_mw=400_000),
               hw.FakeGpu(uuid=UUID1, min_limit_mw=150_000, max_limit_mw=350_000)])
    assert power_limit_range() == (150.0, 350.0)
    assert power_limit_range(gpus=[0]) == (100.0, 400.0)
    with pytest.raises(ValueError, match=r"GPU index must be in \[0, 1\]"):
        power_limit_range(gpus=[2])


def test_limit_is_set_for_the_block_persisted_first_and_restored(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=300_000)])
    state = tmp_path / "state.json"
    real_set = nv.nvmlDeviceSetPowerManagementLimit
    persisted_at_set: list[bool] = []

    def spy(h, mw):
        persisted_at_set.append(UUID0 in _entries(state))
        real_set(h, mw)

    nv.nvmlDeviceSetPowerManagementLimit = spy
    with gpu_power_limit(200, gpus=[0], state_path=state) as facts:
        assert nv.gpus[0].power_limit_mw == 200_000
        entry = _entries(state)[UUID0]
        assert entry["pid"] == os.getpid() and entry["original_mw"] == 300_000
        assert entry["set_mw"] == 200_000 and (entry["min_mw"], entry["max_mw"]) == (100_000,
                                                                                   400_000)
        assert facts[0].original_w == 300.0 and facts[0].set_w == 200.0
    assert nv.gpus[0].power_limit_mw == 300_000
    assert nv.gpus[0].limit_history == [200_000, 300_000]
    assert persisted_at_set == [True, True]  # the original was on disk before the change
    assert _entries(state) == {}


def test_restored_when_the_block_raises(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=250_000), hw.FakeGpu(uuid=UUID1,
                                                                  power_limit_mw=260_000)])
    state = tmp_path / "state.json"
    with pytest.raises(KeyboardInterrupt):
        with gpu_power_limit(150, gpus=[0, 1], state_path=state):
            assert [g.power_limit_mw for g in nv.gpus] == [150_000, 150_000]
            raise KeyboardInterrupt
    assert [g.power_limit_mw for g in nv.gpus] == [250_000, 260_000]
    assert _entries(state) == {}


def test_out_of_range_is_refused_before_anything_changes(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu()])
    with pytest.raises(ValueError, match=r"range \[100, 400\] W .* got 450 W"):
        with gpu_power_limit(450, gpus=[0], state_path=tmp_path / "s.json"):
            pass  # pragma: no cover
    assert nv.gpus[0].calls.get("set_limit") is None and _entries(tmp_path / "s.json") == {}


def test_no_permission_says_what_is_needed(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(can_set_limit=False, power_limit_mw=300_000)])
    state = tmp_path / "s.json"
    with pytest.raises(PowerLimitError) as err:
        with gpu_power_limit(200, gpus=[0], state_path=state):
            pass  # pragma: no cover
    msg = str(err.value)
    assert "NVML_ERROR_NO_PERMISSION" in msg and "root" in msg and "nvidia-smi -pm 1" in msg
    assert nv.gpus[0].power_limit_mw == 300_000 and _entries(state) == {}


def test_unsupported_gpu_is_a_clear_error(fake_nvml, hw, tmp_path):
    fake_nvml([hw.FakeGpu(limit_supported=False)])
    with pytest.raises(PowerLimitError, match="does not support"):
        power_limit_range()


def test_a_live_holder_blocks_a_second_change(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=300_000)])
    state = tmp_path / "s.json"
    with gpu_power_limit(200, gpus=[0], state_path=state):
        with pytest.raises(PowerLimitError, match="already held by process"):
            with gpu_power_limit(150, gpus=[0], state_path=state):
                pass  # pragma: no cover
        assert nv.gpus[0].power_limit_mw == 200_000  # the outer limit stands
    assert nv.gpus[0].power_limit_mw == 300_000


def test_a_killed_process_leaves_an_entry_that_the_next_open_restores(fake_nvml, hw, tmp_path):
    """A real child process sets a limit and dies inside the block (os._exit, like SIGKILL)."""
    state = tmp_path / "state.json"
    child = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = [{str(ROOT)!r}, {str(TESTS)!r}]
        from fake_pynvml import FakeGpu, installed_fake_pynvml
        from ecopt.meters.power_limit import gpu_power_limit
        with installed_fake_pynvml([FakeGpu(power_limit_mw=300_000)]):
            with gpu_power_limit(175, gpus=[0], state_path={str(state)!r}):
                os._exit(9)
    """)
    res = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 9, res.stderr
    left = _entries(state)[UUID0]
    assert left["original_mw"] == 300_000 and left["set_mw"] == 175_000
    # This process sees the same GPU with the dead child's limit still applied.
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=175_000)])
    out = restore_stale_power_limits(state)
    assert [o["outcome"] for o in out] == ["restored 300 W"] and out[0]["uuid"] == UUID0
    assert nv.gpus[0].power_limit_mw == 300_000 and _entries(state) == {}
    assert restore_stale_power_limits(state) == []  # nothing left to do


def test_stale_entries_from_an_earlier_boot_are_dropped_untouched(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=300_000)])
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"version": 1, "entries": {UUID0: {
        "pid": 1, "boot_id": "another-boot", "original_mw": 250_000, "set_mw": 200_000}}}))
    out = restore_stale_power_limits(state)
    assert out[0]["outcome"].startswith("dropped: earlier boot")
    assert nv.gpus[0].calls.get("set_limit") is None and _entries(state) == {}


def test_failed_restore_keeps_the_entry_and_never_raises(fake_nvml, hw, tmp_path, caplog):
    fake_nvml([hw.FakeGpu(can_set_limit=False)])
    state = tmp_path / "s.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    entry = {"pid": int(dead), "original_mw": 250_000, "set_mw": 200_000, "name": "x"}
    state.write_text(json.dumps({"version": 1, "entries": {UUID0: entry}}))
    out = restore_stale_power_limits(state)
    assert out[0]["outcome"].startswith("failed: no permission")
    assert UUID0 in _entries(state) and "could not restore" in caplog.text
    assert restore_stale_power_limits(tmp_path / "missing.json") == []


def test_state_path_is_host_local_and_overridable(monkeypatch, tmp_path):
    import socket

    monkeypatch.delenv("ECOPT_POWER_LIMIT_STATE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_state_path() == tmp_path / "ecopt" / f"gpu-power-limits-{socket.gethostname()}.json"
    monkeypatch.setenv("ECOPT_POWER_LIMIT_STATE", str(tmp_path / "x.json"))
    assert default_state_path() == tmp_path / "x.json"


def test_power_limit_as_a_search_dimension(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=400_000)])
    seen: list[int] = []

    def objective(trial):
        seen.append(nv.gpus[0].power_limit_mw)
        with trial.phase("work", samples=10):
            pass
        if trial.params["power_limit_w"] > 300:
            raise RuntimeError("crash under a high limit")
        return {"spj": trial.samples_per_joule("work")}

    space = ecopt.SearchSpace({"power_limit_w": ecopt.Float(*power_limit_range())})
    study = ecopt.Study(space, [ecopt.Objective("spj", "max")], storage=tmp_path / "st",
                        sampler="random", meter="estimate")
    obj = PowerLimitObjective(objective, gpus=[0], state_path=str(tmp_path / "state.json"))
    for w in (150.0, 350.0):
        t = study.ask(params={"power_limit_w": w})
        try:
            study.tell(t, obj(t))
        except RuntimeError as exc:
            study.tell(t, exc)
    assert seen == [150_000, 350_000] and nv.gpus[0].power_limit_mw == 400_000
    ok, failed = study.records
    assert ok.state.value == "complete" and failed.state.value == "failed"
    for rec, w in ((ok, 150.0), (failed, 350.0)):  # recorded even when the trial fails
        assert rec.metrics["power_limit_w"] == w and rec.metrics["power_limit_original_w"] == 400
        assert (rec.metrics["power_limit_min_w"], rec.metrics["power_limit_max_w"]) == (100, 400)
        assert rec.user_attrs["power_limit"][0]["uuid"] == UUID0
    study.close()
    # Trials without the param run without touching the GPU.
    plain = PowerLimitObjective(lambda trial: {"x": 1.0}, gpus=[0],
                                state_path=str(tmp_path / "state.json"))
    assert plain(ecopt.Trial(0, {}, ecopt.meters.get_meter("estimate"))) == {"x": 1.0}
    assert nv.gpus[0].calls["set_limit"] == 4


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout.strip())


def test_opening_a_study_never_touches_gpu_settings(fake_nvml, hw, tmp_path, monkeypatch):
    """Issue 26: a Study does not change GPU settings; power limits are repaired where used."""
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=180_000)])
    state = tmp_path / "s.json"
    monkeypatch.setenv("ECOPT_POWER_LIMIT_STATE", str(state))
    state.write_text(json.dumps({"version": 1, "entries": {UUID0: {
        "pid": _dead_pid(), "original_mw": 320_000, "set_mw": 180_000}}}))
    study = ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1)}),
                        [ecopt.Objective("y", "min")], sampler="random", meter="estimate")
    study.close()
    assert nv.gpus[0].calls.get("set_limit") is None and UUID0 in _entries(state)
    # The power-limit objective repairs it, even for a trial that sets no limit...
    obj = PowerLimitObjective(lambda trial: {"y": 1.0}, gpus=[0])
    assert obj(ecopt.Trial(0, {}, ecopt.meters.get_meter("estimate"))) == {"y": 1.0}
    assert nv.gpus[0].power_limit_mw == 320_000 and _entries(state) == {}


def test_a_dead_holders_limit_is_restored_before_the_original_is_read(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=175_000)])  # left at 175 W by a dead process
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"version": 1, "entries": {UUID0: {
        "pid": _dead_pid(), "original_mw": 300_000, "set_mw": 175_000}}}))
    with gpu_power_limit(200, gpus=[0], state_path=state) as facts:
        assert facts[0].original_w == 300.0  # not the dead process's 175 W
        assert _entries(state)[UUID0]["original_mw"] == 300_000
    assert nv.gpus[0].power_limit_mw == 300_000 and _entries(state) == {}


def test_power_limits_need_explicit_gpus(fake_nvml, hw, tmp_path):
    """Issue 30 finding 5: no "every visible GPU" default for a cap."""
    nv = fake_nvml([hw.FakeGpu(), hw.FakeGpu(uuid=UUID1)])
    with pytest.raises(ValueError, match="gpus must name the GPUs"):
        with gpu_power_limit(200, state_path=tmp_path / "s.json"):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="needs gpus="):
        PowerLimitObjective(lambda trial: None)
    assert all(g.calls.get("set_limit") is None for g in nv.gpus)


def test_the_cuda_gpu_is_capped_matched_by_uuid(fake_nvml, hw, tmp_path, monkeypatch):
    """Issue 30 finding 6: CUDA's cuda:0 is the fast GPU, NVML's index 0 the slow one."""
    nv = fake_nvml([hw.FakeGpu(name="NVIDIA A10", speed=1.0),
                    hw.FakeGpu(uuid=UUID1, name="NVIDIA H100", speed=3.0)])
    hw.FakeCuda(nv.gpus).install(monkeypatch)
    with gpu_power_limit(150, gpus=[0], state_path=tmp_path / "s.json") as facts:
        assert facts[0].uuid == UUID1
        assert [g.power_limit_mw for g in nv.gpus] == [400_000, 150_000]
    assert [g.power_limit_mw for g in nv.gpus] == [400_000, 400_000]


def test_mig_is_refused_for_power_limits(fake_nvml, hw, tmp_path, monkeypatch):
    """Issue 30 finding 3: MIG entries used to become GPU-MIG-... and crash."""
    nv = fake_nvml([hw.FakeGpu(mig_devices=["MIG-aaaa"])])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-aaaa")
    with pytest.raises(PowerLimitError, match="MIG"):
        power_limit_range(gpus=[0])
    with pytest.raises(PowerLimitError, match="MIG slice"):
        with gpu_power_limit(200, gpus=[0], state_path=tmp_path / "s.json"):
            pass  # pragma: no cover
    assert nv.gpus[0].calls.get("set_limit") is None


def test_the_enforced_limit_is_read_back(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=300_000, external_cap_mw=250_000)])
    trial = ecopt.Trial(0, {}, ecopt.meters.get_meter("estimate"))
    with gpu_power_limit(280, gpus=[0], trial=trial, state_path=tmp_path / "s.json") as facts:
        assert nv.gpus[0].power_limit_mw == 280_000 and facts[0].enforced_w == 250.0
    assert trial.metrics["power_limit_w"] == 280 and trial.metrics["power_limit_enforced_w"] == 250


@pytest.mark.parametrize("pid", ["missing", 0, -1, "x"])
def test_stale_entries_with_invalid_pids_are_restored_and_removed(fake_nvml, hw, tmp_path, pid):
    """Issue 28 item 5: pid missing, 0 or -1 used to look alive (os.kill(0 or -1, 0) succeeds)."""
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=150_000)])
    entry = {"original_mw": 300_000, "set_mw": 150_000}
    if pid != "missing":
        entry["pid"] = pid
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"version": 1, "entries": {UUID0: entry}}))
    out = restore_stale_power_limits(state)
    assert [o["outcome"] for o in out] == ["restored 300 W"]
    assert nv.gpus[0].power_limit_mw == 300_000 and _entries(state) == {}


def test_every_restored_entry_is_removed(fake_nvml, hw, tmp_path):
    """Issue 28 item 5: an entry without set_mw was restored but never deleted."""
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=150_000, default_limit_mw=350_000),
                    hw.FakeGpu(uuid=UUID1, power_limit_mw=150_000)])
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"version": 1, "entries": {
        UUID0: {"pid": _dead_pid()},  # nothing recorded but the pid: back to the default
        UUID1: {"pid": _dead_pid(), "original_mw": 280_000},  # no set_mw
        "GPU-gone": "not an entry"}}))
    out = {o["uuid"]: o["outcome"] for o in restore_stale_power_limits(state)}
    assert out == {UUID0: "restored 350 W (the board's default)", UUID1: "restored 280 W",
                   "GPU-gone": "dropped: unreadable entry"}
    assert [g.power_limit_mw for g in nv.gpus] == [350_000, 280_000] and _entries(state) == {}


_HOLDER = textwrap.dedent("""
    import os, signal, sys, time
    sys.path[:0] = [{root!r}, {tests!r}]
    from fake_pynvml import FakeGpu, installed_fake_pynvml
    from ecopt.meters.power_limit import gpu_power_limit

    # The default dispositions, whatever the test runner inherited (nohup ignores SIGHUP,
    # and an ignored signal stays ignored after the limit is restored, as it should).
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    log = open({log!r}, "a")
    with installed_fake_pynvml([FakeGpu(power_limit_mw=300_000)]) as nv:
        real = nv.nvmlDeviceSetPowerManagementLimit

        def logged(h, mw):  # the GPU's limit history, for the parent to read
            real(h, mw)
            log.write(f"{{mw}}\\n")
            log.flush()

        nv.nvmlDeviceSetPowerManagementLimit = logged
        if {chain!r}:
            def previous(signum, frame):
                open({mark!r}, "w").write(str(signum))
                sys.exit(7)

            signal.signal(signal.SIGTERM, previous)
        with gpu_power_limit(175, gpus=[0], state_path={state!r}):
            print("holding", flush=True)
            time.sleep(60)
""")


def _hold_and_signal(tmp_path: Path, sig: int, chain: bool = False) -> tuple[int, list[int]]:
    state, log, mark = tmp_path / "state.json", tmp_path / "limits.log", tmp_path / "mark"
    code = _HOLDER.format(root=str(ROOT), tests=str(TESTS), log=str(log), state=str(state),
                          chain=chain, mark=str(mark))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding", \
            child.stderr.read() if child.stderr else ""
        child.send_signal(sig)
        rc = child.wait(timeout=60)
    finally:
        if child.poll() is None:  # pragma: no cover - only when an assertion failed above
            child.kill()
    limits = [int(x) for x in log.read_text().split()]
    assert _entries(state) == {}, "the restored entry must be removed"
    return rc, limits


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_restore_the_limit_then_end_the_process(tmp_path, sig):
    """Issue 28 item 5: a scheduler's SIGTERM (or a closed terminal's SIGHUP) left the GPU capped."""
    rc, limits = _hold_and_signal(tmp_path, sig)
    assert limits == [175_000, 300_000]
    assert rc == -sig  # then the signal's default action: the process ends by that signal


_OBJECTIVE_HOLDER = textwrap.dedent("""
    import os, signal, sys, time
    sys.path[:0] = [{root!r}, {tests!r}]
    from fake_pynvml import FakeGpu, installed_fake_pynvml
    import ecopt
    from ecopt.meters.power_limit import PowerLimitObjective

    log = open({log!r}, "a")
    with installed_fake_pynvml([FakeGpu(power_limit_mw=300_000)]) as nv:
        real = nv.nvmlDeviceSetPowerManagementLimit

        def logged(h, mw):
            real(h, mw)
            log.write(f"{{mw}}\\n")
            log.flush()

        nv.nvmlDeviceSetPowerManagementLimit = logged

        def objective(trial):
            print("holding", flush=True)
            time.sleep(60)
            return {{"y": 1.0}}

        study = ecopt.Study(ecopt.SearchSpace({{"power_limit_w": ecopt.Fixed(175.0)}}),
                            [ecopt.Objective("y", "max")], storage={study!r},
                            sampler="random", meter="wallclock")
        study.optimize(PowerLimitObjective(objective, gpus=[0], state_path={state!r}),
                       n_trials=1, show_progress=False)
""")


def test_sigterm_inside_a_power_limit_objective_restores_the_limit(tmp_path):
    """Issue 28 item 5, the other way a limit is held: a PowerLimitObjective trial of a study."""
    state, log = tmp_path / "state.json", tmp_path / "limits.log"
    code = _OBJECTIVE_HOLDER.format(root=str(ROOT), tests=str(TESTS), log=str(log),
                                    state=str(state), study=str(tmp_path / "study"))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding", \
            child.stderr.read() if child.stderr else ""
        child.send_signal(signal.SIGTERM)
        rc = child.wait(timeout=60)
    finally:
        if child.poll() is None:  # pragma: no cover - only when an assertion failed above
            child.kill()
    assert rc == -signal.SIGTERM
    assert [int(x) for x in log.read_text().split()] == [175_000, 300_000]
    assert _entries(state) == {}


def test_the_previous_sigterm_handler_still_runs(tmp_path):
    rc, limits = _hold_and_signal(tmp_path, signal.SIGTERM, chain=True)
    assert rc == 7 and (tmp_path / "mark").read_text() == str(int(signal.SIGTERM))
    assert limits[:2] == [175_000, 300_000] and limits[-1] == 300_000


def test_signal_handlers_are_installed_only_while_a_limit_is_held(fake_nvml, hw, tmp_path):
    fake_nvml([hw.FakeGpu()])
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    with gpu_power_limit(200, gpus=[0], state_path=tmp_path / "s.json"):
        assert all(signal.getsignal(s) is not h for s, h in before.items())
    assert {s: signal.getsignal(s) for s in before} == before


def test_ecopt_gpu_restore(fake_nvml, hw, tmp_path, monkeypatch, capsys):
    from ecopt.cli import main

    nv = fake_nvml([hw.FakeGpu(power_limit_mw=150_000),
                    hw.FakeGpu(uuid=UUID1, power_limit_mw=150_000, can_set_limit=False)])
    state = tmp_path / "s.json"
    monkeypatch.setenv("ECOPT_POWER_LIMIT_STATE", str(state))
    dead = _dead_pid()
    state.write_text(json.dumps({"version": 1, "entries": {
        UUID0: {"pid": dead, "original_mw": 300_000, "set_mw": 150_000, "name": "A100"},
        "GPU-live": {"pid": os.getpid(), "pid_start": "", "original_mw": 1, "set_mw": 2}}}))
    assert main(["gpu", "restore", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would restore 300 W" in out and "held by live process" in out and "dry run" in out
    assert nv.gpus[0].power_limit_mw == 150_000 and UUID0 in _entries(state)
    assert main(["gpu", "restore"]) == 0
    assert "restored 300 W" in capsys.readouterr().out and nv.gpus[0].power_limit_mw == 300_000
    assert set(_entries(state)) == {"GPU-live"}
    # An entry that cannot be restored (no permission): exit 1, entry kept, reason printed.
    st = json.loads(state.read_text())
    st["entries"][UUID1] = {"pid": dead, "original_mw": 300_000, "set_mw": 150_000}
    state.write_text(json.dumps(st))
    assert main(["gpu", "restore", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["handled"][0]["outcome"].startswith("failed: no permission")
    assert UUID1 in _entries(state)
    assert main(["gpu"]) == 2


def test_an_emergency_exit_can_restore_its_own_limits(fake_nvml, hw, tmp_path):
    nv = fake_nvml([hw.FakeGpu(power_limit_mw=300_000)])
    state = tmp_path / "s.json"
    with gpu_power_limit(120, gpus=[0], state_path=state):
        assert restore_stale_power_limits(state) == []  # this process is alive: kept
        out = restore_stale_power_limits(state, include_this_process=True)
        assert [o["outcome"] for o in out] == ["restored 300 W"]
        assert nv.gpus[0].power_limit_mw == 300_000 and _entries(state) == {}
    assert nv.gpus[0].power_limit_mw == 300_000  # the block's own restore is harmless


def test_a_refused_limit_is_shown_with_every_digit_given(fake_nvml, hw, tmp_path):
    fake_nvml([hw.FakeGpu()])
    with pytest.raises(ValueError, match=r"range \[100, 400\] W .* got 400.0004 W"):
        with gpu_power_limit(400.0004, gpus=[0], state_path=tmp_path / "s.json"):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="finite number of watts"):
        with gpu_power_limit(10**400, gpus=[0], state_path=tmp_path / "s.json"):
            pass  # pragma: no cover


def test_without_root_the_limit_goes_through_zeusd(fake_nvml, hw, zeusd, tmp_path, monkeypatch):
    """An unprivileged process (NVML says NO_PERMISSION) sets and restores limits via zeusd."""
    pytest.importorskip("zeus.utils.zeusd")
    from ecopt.meters import power_limit as pl

    monkeypatch.setattr(pl, "_has_sys_admin", lambda: False)
    # NVML order differs from CUDA's: cuda:0 is NVML's GPU 1 (named by UUID), so zeusd, which
    # numbers GPUs as NVML does, must be told index 1.
    nv = fake_nvml([hw.FakeGpu(can_set_limit=False, power_limit_mw=300_000),
                    hw.FakeGpu(uuid=UUID1, can_set_limit=False, power_limit_mw=350_000)])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUID1)
    d = zeusd(nvml=nv)
    state = tmp_path / "s.json"
    seen = []

    def objective(trial):
        seen.append([g.power_limit_mw for g in nv.gpus])
        return {"a": 1.0, "b": 2.0}

    import ecopt

    space = ecopt.SearchSpace({"power_limit_w": ecopt.Categorical([200.0])})
    study = ecopt.Study(space, [ecopt.Objective("a", "max"), ecopt.Objective("b", "max")],
                        sampler="random", meter="wallclock", seed=0)
    study.optimize(PowerLimitObjective(objective, gpus=[0], state_path=str(state)), n_trials=1,
                   show_progress=False)
    assert seen == [[300_000, 200_000]]  # NVML's GPU 1 was capped, GPU 0 untouched
    assert nv.gpus[1].limit_history == [200_000, 350_000] and nv.gpus[0].limit_history == []
    sets = [q for m, p, q in d.requests if p == "/gpu/set_power_limit"]
    assert [q["gpu_ids"] for q in sets] == ["1", "1"] and _entries(state) == {}


def test_zeusd_without_gpu_control_says_so(fake_nvml, hw, zeusd, tmp_path, monkeypatch):
    pytest.importorskip("zeus.utils.zeusd")
    from ecopt.meters import power_limit as pl

    monkeypatch.setattr(pl, "_has_sys_admin", lambda: False)
    nv = fake_nvml([hw.FakeGpu(can_set_limit=False)])
    zeusd(nvml=nv, groups=("gpu-read", "cpu-read"))
    with pytest.raises(PowerLimitError, match="gpu-control"):
        with gpu_power_limit(200, gpus=[0], state_path=tmp_path / "s.json"):
            pass  # pragma: no cover
    assert nv.gpus[0].limit_history == []
