"""The trial log: plain JSON lines, torn lines skipped, one writer at a time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings

import pytest

import ecopt
from ecopt.errors import NotAStudyError, StudyLockedError
from ecopt.storage import StudyStorage, read_jsonl

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
OBJS = [ecopt.Objective("a", "max"), ecopt.Objective("b", "min")]


def _study(path, **kw):
    kw.setdefault("sampler", "random")
    kw.setdefault("meter", "estimate")
    return ecopt.Study(SPACE, OBJS, storage=path, **kw)


def _f(t):
    with t.phase("work", samples=10):
        sum(range(1000))
    return {"a": t["x"], "b": (1 - t["x"]) ** 2}


def test_files_are_plain_json_with_provenance(run_dir):
    s = _study(run_dir)
    s.optimize(_f, n_trials=3)
    s.close()
    spec = json.loads((run_dir / "study.json").read_text())
    assert spec["format"] == "ecopt-study" and spec["space"]["x"]["type"] == "float"
    assert spec["host"]["cpu_count"] >= 1 and "python" in spec["host"]
    assert spec["meter"]["meter"] == "estimate"
    lines = (run_dir / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 3
    rec = json.loads(lines[0])
    assert rec["state"] == "complete" and rec["number"] == 0
    comp = rec["phases"]["work"]["components"]["cpu"]
    assert comp["source"] == "estimate-cpu-time" and comp["measured"] is False
    assert rec["phases"]["work"]["samples"] == 10
    assert rec["proposed_by"] in ("random", "sobol")


def test_torn_last_line_is_skipped_with_warning(run_dir):
    s = _study(run_dir)
    s.optimize(_f, n_trials=2)
    s.close()
    with open(run_dir / "trials.jsonl", "a") as f:
        f.write('{"number": 2, "state": "compl')
    with pytest.warns(RuntimeWarning, match="torn last line 3"):
        loaded = ecopt.load_study(run_dir)
    assert [r.number for r in loaded.records] == [0, 1]
    # Writing after a torn tail starts a fresh line, so the new record survives.
    with pytest.warns(RuntimeWarning):
        s2 = _study(run_dir)
        s2.optimize(_f, n_trials=1)
        s2.close()
    with pytest.warns(RuntimeWarning, match="corrupt line 3"):
        assert [r.number for r in ecopt.load_study(run_dir).records] == [0, 1, 2]


def test_loading_never_unpickles(run_dir, tmp_path):
    s = _study(run_dir)
    s.optimize(_f, n_trials=1)
    s.close()
    marker = tmp_path / "pwned"
    evil = {"number": 7, "state": "complete", "params": {"x": 0.5}, "values": {"a": 1, "b": 1},
            "user_attrs": {"__reduce__": f"os.system('touch {marker}')"},
            "error": None}
    with open(run_dir / "trials.jsonl", "a") as f:
        f.write(json.dumps(evil) + "\n")
        f.write("cos\nsystem\n(S'touch " + str(marker) + "'\ntR.\n")  # a pickle payload
    with pytest.warns(RuntimeWarning):
        loaded = ecopt.load_study(run_dir)
    assert not marker.exists()
    assert {r.number for r in loaded.records} == {0, 7}


def test_second_writer_gets_a_clear_error(run_dir):
    s = _study(run_dir)
    code = textwrap.dedent(f"""
        import ecopt, sys
        try:
            ecopt.Study(ecopt.SearchSpace({{"x": ecopt.Float(0, 1)}}),
                        [ecopt.Objective("a", "max"), ecopt.Objective("b", "min")],
                        storage={str(run_dir)!r}, sampler="random", meter="estimate")
        except ecopt.StudyLockedError as e:
            print("LOCKED", e); sys.exit(3)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    assert "open for writing in another process" in p.stdout and "load_study" in p.stdout
    # Readers are fine while the writer holds the lock.
    assert ecopt.load_study(run_dir).records == []
    s.close()
    _study(run_dir).close()  # the lock is free again


def test_in_process_second_writer_takes_over_and_the_first_says_so(run_dir):
    s = _study(run_dir)
    s.optimize(_f, n_trials=1)
    s2 = _study(run_dir)  # a notebook cell run again
    assert [r.number for r in s2.records] == [0]
    with pytest.raises(ecopt.EcoptError, match="replaced: a newer ecopt.Study"):
        s.ask()
    assert len(s.records) == 1  # still readable
    s2.optimize(_f, n_trials=1)
    assert [r.number for r in ecopt.load_study(run_dir).records] == [0, 1]
    s2.close()


def test_not_a_study(tmp_path):
    with pytest.raises(NotAStudyError, match="has no study.json"):
        ecopt.load_study(tmp_path)
    (tmp_path / "study.json").write_text("{not json")
    with pytest.raises(NotAStudyError, match="not valid JSON"):
        ecopt.load_study(tmp_path)
    (tmp_path / "study.json").write_text('{"format": "other"}')
    with pytest.raises(NotAStudyError, match="not an ecopt study file"):
        ecopt.load_study(tmp_path)
    with pytest.raises(NotAStudyError, match="not a directory"):
        ecopt.load_study(tmp_path / "missing")


def test_read_jsonl_skips_non_objects(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n[1, 2]\n{"b": 2}\n')
    with pytest.warns(RuntimeWarning, match="corrupt line 2"):
        assert list(read_jsonl(p)) == [{"a": 1}, {"b": 2}]


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("where", ["trials", "running"])
def test_a_deeply_nested_line_is_skipped_not_fatal(run_dir, capsys, where):
    # A valid 2 KB line nested 1,000 levels deep made every reader raise RecursionError.
    s = _study(run_dir)
    s.optimize(_f, n_trials=2)
    s.close()
    name = "trials.jsonl" if where == "trials" else "running.jsonl"
    with open(run_dir / name, "a") as f:
        f.write('{"number": 7, "user_attrs": {"x": ' + _deep(1000) + "}}\n")
    deep = r"skipping line \d+ .*nested deeper than 64"
    if where == "trials":
        with pytest.warns(RuntimeWarning, match=deep):
            loaded = ecopt.load_study(run_dir)
        assert [r.number for r in loaded.records] == [0, 1]
        from ecopt.cli import main

        for cmd in (["show", str(run_dir)], ["report", str(run_dir), "--out",
                                              str(run_dir / "report")]):
            assert main(cmd) == 0
            assert "nested deeper than 64 levels" in capsys.readouterr().err
    with pytest.warns(RuntimeWarning, match=deep):  # a writer re-opens it and goes on
        s2 = _study(run_dir)
        s2.optimize(_f, n_trials=1)
        s2.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(ecopt.load_study(run_dir).records) == 3


def test_a_line_nested_past_the_reader_limit_is_skipped(tmp_path):
    from ecopt._nesting import MAX_LINE_DEPTH

    p = tmp_path / "x.jsonl"
    p.write_text('{"a": ' + _deep(MAX_LINE_DEPTH) + '}\n{"b": ' + _deep(MAX_LINE_DEPTH - 1)
                 + "}\n")
    with pytest.warns(RuntimeWarning, match="line 1 .*nested deeper than 64"):
        got = list(read_jsonl(p))
    assert list(got[0]) == ["b"]


def test_a_deeply_nested_study_json_is_not_a_study(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    (d / "study.json").write_text('{"format": "ecopt-study", "x": ' + _deep(1000) + "}")
    with pytest.raises(NotAStudyError, match="not valid JSON|nested deeper"):
        StudyStorage(d).read_spec()


def test_set_user_attr_refuses_an_over_deep_value_before_writing(run_dir):
    from ecopt._nesting import MAX_VALUE_DEPTH

    def f(t):
        nested: object = 1
        for _ in range(MAX_VALUE_DEPTH):
            nested = [nested]
        t.set_user_attr("ok", nested)  # exactly the limit is kept
        with pytest.raises(ValueError, match="'bad' is nested deeper than 32"):
            t.set_user_attr("bad", [nested])
        with pytest.raises(ValueError, match="key must be a string"):
            t.set_user_attr(3, 1)
        return _f(t)

    s = _study(run_dir)
    s.optimize(f, n_trials=1)
    s.close()
    rec = ecopt.load_study(run_dir).records[0]
    assert rec.state == "complete" and set(rec.user_attrs) == {"ok"}


def test_not_a_study_says_what_the_folder_holds(tmp_path):
    runs = tmp_path / "runs"
    for name in ("b-study", "a-study"):
        s = _study(runs / name)
        s.optimize(_f, n_trials=1)
        s.close()
    (runs / "notes").mkdir()
    with pytest.raises(NotAStudyError, match=r"folder of 2 studies \(a-study, b-study\): name "
                                             r"one of them, e\.g\. .*a-study"):
        ecopt.load_study(runs)
    (runs / "a-study" / "study.json").unlink()
    with pytest.raises(NotAStudyError, match=r"study.json was lost: `ecopt repair .*a-study` "
                                             r"rebuilds it"):
        ecopt.load_study(runs / "a-study")
    from ecopt.cli import main

    assert main(["show", str(runs / "a-study")]) == 2
    assert main(["repair", str(runs / "a-study")]) == 0
    assert len(ecopt.load_study(runs / "a-study").records) == 1
    # A trial log copied without running.jsonl: repair has nothing to rebuild from, so the
    # advice is to restore the files, not `ecopt repair` (which would refuse).
    (runs / "b-study" / "study.json").unlink()
    (runs / "b-study" / "running.jsonl").unlink()
    with pytest.raises(NotAStudyError, match=r"running.jsonl, whose copy of it `ecopt repair` "
                                             r"uses, is missing too: restore study.json"):
        ecopt.load_study(runs / "b-study")
    assert main(["repair", str(runs / "b-study")]) == 2
