"""Short writes, a full disk and failing fsyncs at the lowest layer (os.write / os.fsync)."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from pathlib import Path

import pytest

import ecopt
import ecopt.storage as storage
from ecopt.errors import StorageError
from faults_helpers import assert_saved, f, make_study


def test_short_writes_still_write_whole_lines(run_dir, monkeypatch):
    real = os.write

    def trickle(fd, data):  # the kernel may write less than asked: 7 bytes at a time
        return real(fd, bytes(data[:7]))

    st = make_study(run_dir)
    monkeypatch.setattr(storage.os, "write", trickle)
    saved = st.optimize(f, n_trials=3, show_progress=False)
    monkeypatch.undo()
    assert_saved(run_dir, saved)
    assert all(line.endswith("}") for line in
               (run_dir / "trials.jsonl").read_text().splitlines())
    st.close()


def test_disk_full_mid_line_raises_and_leaves_no_torn_line(run_dir, monkeypatch):
    st = make_study(run_dir)
    saved = st.optimize(f, n_trials=2, show_progress=False)
    before = (run_dir / "trials.jsonl").read_bytes()
    real = os.write
    calls = {"n": 0}

    def half_then_full(fd, data):
        calls["n"] += 1
        if calls["n"] == 1:
            return real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    t = st.ask()
    values = f(t)
    monkeypatch.setattr(storage.os, "write", half_then_full)
    with pytest.raises(StorageError, match="No space left on device"):
        st.tell(t, values)
    monkeypatch.undo()
    # Nothing half-written, nothing lost, and the trial is still ours to tell.
    assert (run_dir / "trials.jsonl").read_bytes() == before
    assert [x.number for x in st.running] == [t.number]
    saved.append(st.tell(t, values))  # space is back
    assert_saved(run_dir, saved)
    st.close()


def test_fsync_failure_is_an_error_not_a_silent_success(run_dir, monkeypatch):
    st = make_study(run_dir)
    t = st.ask()
    monkeypatch.setattr(storage.os, "fsync",
                        lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(StorageError, match="I/O error"):
        st.tell(t, f(t))
    monkeypatch.undo()
    assert st.running and st.records == []
    st.close()


@pytest.mark.parametrize("lines", [4, 5])  # full at a trial's start line, or at its end line
def test_a_full_disk_stops_optimize_and_every_saved_trial_survives(run_dir, monkeypatch, lines):
    st = make_study(run_dir)
    real = os.write
    budget = {"lines": lines}  # the disk fills after this many more lines

    def filling(fd, data):
        if budget["lines"] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        budget["lines"] -= 1
        return real(fd, data)

    saved: list[ecopt.TrialRecord] = []
    monkeypatch.setattr(storage.os, "write", filling)
    with pytest.raises(StorageError):
        st.optimize(f, n_trials=10, show_progress=False,
                    callbacks=[lambda study, rec: saved.append(rec)])
    monkeypatch.undo()
    assert len(saved) == 2
    assert_saved(run_dir, saved)
    st.close()
    st = make_study(run_dir)
    if lines == 5:  # trial 2 started on disk, its end could not be written: interrupted
        assert st.records[-1].interrupted and len(st.records) == 3
    else:  # trial 2's start could not be written: it never started
        assert len(st.records) == 2
    st.close()


@pytest.fixture
def tiny_tmpfs(tmp_path):
    where = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode})")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_real_full_filesystem(tiny_tmpfs: Path):
    run_dir = tiny_tmpfs / "study"
    st = make_study(run_dir)
    saved: list[ecopt.TrialRecord] = []
    with pytest.raises(StorageError, match="No space left"):
        st.optimize(f, n_trials=500, show_progress=False,
                    callbacks=[lambda study, rec: saved.append(rec)])
    assert len(saved) > 3
    assert_saved(run_dir, saved)
    lines = (run_dir / "trials.jsonl").read_text().splitlines()
    assert len(lines) == len(saved)  # whole lines only
    st.close()
