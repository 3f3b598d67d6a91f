"""A deleted lock or study.json, wrong-shaped lines, overwrites, notebook re-runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

import ecopt
from ecopt.cli import main
from ecopt.errors import MissingSpecError, StudyLockedError
from faults_helpers import assert_saved, f, make_study

HOLD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {here!r})
    from faults_helpers import make_study
    st = make_study({path!r})
    print("OPEN", flush=True)
    time.sleep(60)
""")


def _hold(path, here):
    proc = subprocess.Popen([sys.executable, "-c", HOLD.format(here=here, path=str(path))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "OPEN", proc.stderr.read()
    return proc


def test_deleting_the_lock_file_lets_no_second_writer_in(run_dir):
    from pathlib import Path

    make_study(run_dir).close()
    proc = _hold(run_dir, str(Path(__file__).parent))
    try:
        (run_dir / ".lock").unlink()
        with pytest.raises(StudyLockedError, match="open for writing in another process"):
            make_study(run_dir)
    finally:
        proc.kill()
        proc.wait()
    make_study(run_dir).close()  # the lock died with its holder


def test_a_deleted_study_json_is_a_clear_error_and_repair_restores_it(run_dir, capsys):
    st = make_study(run_dir)
    saved = st.optimize(f, n_trials=3, show_progress=False)
    st.close()
    (run_dir / "study.json").unlink()
    with pytest.raises(MissingSpecError, match="ecopt repair") as e:
        make_study(run_dir)
    assert "overwrite=True" in str(e.value) and "restore study.json" in str(e.value).lower()
    assert main(["repair", str(run_dir)]) == 0
    assert "restored" in capsys.readouterr().out
    st = make_study(run_dir)
    more = st.optimize(f, n_trials=1, show_progress=False)
    assert [r.number for r in more] == [3]  # numbering goes on: nothing is shadowed
    st.close()
    assert_saved(run_dir, saved + more)
    assert main(["repair", str(run_dir)]) == 2  # nothing to repair now
    assert "nothing to repair" in capsys.readouterr().err


def test_overwrite_instead_of_repair_keeps_the_old_trials_aside(run_dir):
    st = make_study(run_dir)
    st.optimize(f, n_trials=2, show_progress=False)
    st.close()
    (run_dir / "study.json").unlink()
    with pytest.warns(UserWarning, match="moved to"):
        st = make_study(run_dir, overwrite=True)
    assert st.records == []
    st.close()
    aside = [p for p in run_dir.iterdir() if p.name.startswith("replaced-")]
    assert len(aside) == 1 and len((aside[0] / "trials.jsonl").read_text().splitlines()) == 2


def test_two_overwrites_within_a_second_keep_both_old_studies(run_dir):
    other = [ecopt.Objective("f1", "max"), ecopt.Objective("f2", "max")]
    st = make_study(run_dir)
    st.optimize(f, n_trials=1, show_progress=False)
    st.close()
    for objectives in (other, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "max")]):
        with pytest.warns(UserWarning):
            st = ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)}),
                             objectives, storage=run_dir, sampler="random", meter="estimate",
                             overwrite=True)
        st.optimize(f if objectives is not other else
                    (lambda t: {"f1": 1.0, "f2": 2.0}), n_trials=1, show_progress=False)
        st.close()
    aside = sorted(p for p in run_dir.iterdir() if p.name.startswith("replaced-"))
    assert len(aside) == 2
    assert all((p / "trials.jsonl").is_file() for p in aside)


WRONG_SHAPES = [
    '{"number": 100, "state": "complete", "error": "x"}',
    '{"number": 101, "state": "running"}',
    '{"number": "7", "state": "complete"}',
    '{"number": true, "state": "failed"}',
    '{"number": -1, "state": "failed"}',
    '{"number": 102, "state": "complete", "values": {"f1": "high"}}',
    '{"number": 103, "state": "complete", "values": [1, 2]}',
    '{"number": 104, "state": "failed", "phases": {"x": 3}}',
    '{"number": 105, "state": "failed", "params": {"x": {"nested": 1}}}',
    '{"number": 106, "state": "failed", "intermediate": [{"step": "a"}]}',
    '{"number": 107, "state": "failed", "feasible": "yes"}',
    '{"state": "complete"}',
    '[1, 2, 3]',
    '"just a string"',
]


@pytest.mark.parametrize("line", WRONG_SHAPES)
def test_a_wrong_shaped_record_is_skipped_like_a_torn_line(run_dir, line, capsys):
    st = make_study(run_dir)
    saved = st.optimize(f, n_trials=2, show_progress=False)
    st.close()
    with open(run_dir / "trials.jsonl", "a") as fh:
        fh.write(line + "\n")
    with pytest.warns(RuntimeWarning, match="skipping"):
        loaded = ecopt.load_study(run_dir)
    assert [r.number for r in loaded.records] == [0, 1]
    assert_saved(run_dir, saved)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = make_study(run_dir)  # opens for writing too
        assert len(st.records) == 2
        st.close()
        for cmd in ("show", "report"):
            assert main([cmd, str(run_dir)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_wrong_shaped_running_lines_do_not_stop_a_resume(run_dir):
    st = make_study(run_dir)
    st.optimize(f, n_trials=1, show_progress=False)
    st.close()
    with open(run_dir / "running.jsonl", "a") as fh:
        fh.write('{"number": "x"}\n{"number": 5, "params": 3}\n[1]\n{"number": 6, "report": 1}\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = make_study(run_dir)
    nums = [r.number for r in st.records]
    assert nums[0] == 0 and set(nums[1:]) <= {5, 6}
    assert all(r.interrupted for r in st.records[1:])
    assert st.optimize(f, n_trials=1, show_progress=False)[0].number == 7
    st.close()


def test_a_notebook_cell_run_twice_hands_the_study_over(run_dir):
    st = make_study(run_dir)
    saved = st.optimize(f, n_trials=2, show_progress=False)
    st2 = make_study(run_dir)  # same directory, same process: no "locked by pid <own pid>"
    with pytest.raises(ecopt.EcoptError, match="replaced"):
        st.optimize(f, n_trials=1, show_progress=False)
    saved += st2.optimize(f, n_trials=2, show_progress=False)
    st3 = make_study(run_dir)  # and again
    assert len(st3.records) == 4
    st3.close()
    assert_saved(run_dir, saved)


def test_a_study_busy_in_another_thread_is_not_taken_over(run_dir):
    st = make_study(run_dir)
    started = threading.Event()

    def slow(trial):
        started.set()
        time.sleep(1.0)
        return f(trial)

    th = threading.Thread(target=lambda: st.optimize(slow, n_trials=2, show_progress=False))
    th.start()
    assert started.wait(30)
    with pytest.raises(StudyLockedError, match="still running trials"):
        make_study(run_dir)
    th.join()
    assert [r.state.value for r in st.records] == ["complete", "complete"]
    st.close()
    make_study(run_dir).close()


def test_study_json_has_the_mode_of_the_other_files(run_dir):
    st = make_study(run_dir)
    st.optimize(f, n_trials=1, show_progress=False)
    st.close()
    modes = {p.name: p.stat().st_mode & 0o777 for p in run_dir.iterdir() if p.is_file()
             and p.name in ("study.json", "trials.jsonl", "running.jsonl")}
    assert len(set(modes.values())) == 1, modes


def test_show_into_a_closed_pipe_is_quiet(run_dir):
    st = make_study(run_dir)
    st.optimize(f, n_trials=30, show_progress=False)
    st.close()
    out = subprocess.run(f"{sys.executable} -m ecopt.cli show {run_dir} | head -1",
                         shell=True, capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("study") and "Error" not in out.stderr, out.stderr


def test_write_errors_name_the_file_that_failed(run_dir, tmp_path, capsys):
    st = make_study(run_dir)
    st.optimize(f, n_trials=3, show_progress=False)
    st.close()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["report", str(run_dir), "--png", str(blocker / "figs")]) == 2
    err = capsys.readouterr().err
    assert "a-file/figs" in err and "report.html" not in err
    (run_dir / "report.html").mkdir()  # the default output path is a directory now
    assert main(["report", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "report.html" in err and "None" not in err


def test_smaller_input_rules():
    with pytest.raises(ValueError, match=r"\[0, 2\*\*63\)"):
        make_study(None, seed=-1)
    with pytest.raises(ValueError, match=r"2\*\*53"):
        ecopt.Int(0, 2**60)

    class Greedy(ecopt.samplers.RandomSampler):
        def propose(self, space, records, pending, n):  # type: ignore[no-untyped-def]
            return super().propose(space, records, pending, n + 3)

    st = make_study(None, sampler=Greedy())
    with pytest.warns(RuntimeWarning, match="extra ones are dropped"):
        recs = st.optimize(f, n_trials=2, show_progress=False)
    assert len(recs) == len(st.records) == 2


def test_the_json_lines_are_what_the_docs_say(run_dir):
    st = make_study(run_dir)
    st.optimize(f, n_trials=1, show_progress=False)
    st.close()
    kinds = [sorted(json.loads(x)) for x in (run_dir / "running.jsonl").read_text().splitlines()]
    assert ["spec"] in kinds and any("number" in k and "params" in k for k in kinds)
