"""`ecopt report | plot | compare | show` on real study directories, good and bad."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import ecopt
from ecopt.cli import main

pytest.importorskip("matplotlib")
from PIL import Image  # noqa: E402

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
OBJS = [ecopt.Objective("accuracy", "max"), ecopt.Objective("samples_per_joule", "max")]


def objective(trial):
    if trial["x"] > 0.85:
        raise RuntimeError("diverged")
    with trial.phase("train"):
        sum(range(3000 + int(3000 * trial["x"])))
    trial.repeat_in_phase("inference", lambda: sum(range(1000 + int(3000 * trial["y"]))),
                       samples_per_call=64)
    return {"accuracy": trial["x"] - 0.2 * trial["y"],
            "samples_per_joule": trial.samples_per_joule("inference")}


def make(path, n=10, seed=0, fn=objective, objectives=OBJS, fail_fast=3):
    with ecopt.Study(SPACE, objectives, storage=path, sampler="random", meter="estimate",
                     seed=seed) as s:
        if n:
            s.optimize(fn, n_trials=n, show_progress=False, fail_fast=fail_fast)
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make(tmp_path_factory.mktemp("cli") / "run")


def first_complete(path):
    return next(r.number for r in ecopt.load_study(path).records if r.phases)


def test_report_writes_html_and_pngs(run, tmp_path, capsys):
    out = tmp_path / "r.html"
    base = first_complete(run)
    rc = main(["report", str(run), "--out", str(out), "--png", str(tmp_path / "png"),
               "--baseline", str(base), "--inferences", "1e6"])
    o = capsys.readouterr()
    assert rc == 0, o.err
    assert f"wrote {out}" in o.out and "ESTIMATED" in o.out
    assert ecopt.report.build_report(run, baseline=base).payback.describe() in o.out
    page = out.read_text()
    data = ecopt.report.build_report(run)
    for n in data.front:
        assert f'<tr class="front"><td>{n}' in page
    assert "lifecycle energy" in page
    with Image.open(tmp_path / "png" / "pareto.png") as im:
        assert im.size == (700, 500)


def test_plot_default_and_chosen_axes(run, tmp_path, capsys):
    out = tmp_path / "front.png"
    assert main(["plot", str(run), "-o", str(out)]) == 0
    with Image.open(out) as im:
        assert im.size == (700, 500)
    out2 = tmp_path / "e.svg"
    assert main(["plot", str(run), "--x", "energy_j", "--y", "accuracy", "-o", str(out2)]) == 0
    assert out2.read_text().lstrip().startswith("<?xml")


def test_plot_writes_into_the_study_by_default_as_report_does(tmp_path, capsys, monkeypatch):
    # Issue 28: `ecopt plot` wrote front.png into the current folder (replacing any file there)
    # while `ecopt report` writes into the study.
    run = make(tmp_path / "study", n=4)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "front.png").write_bytes(b"the user's own file")
    monkeypatch.chdir(cwd)
    assert main(["plot", str(run)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {run / 'front.png'}"
    assert (cwd / "front.png").read_bytes() == b"the user's own file"
    with Image.open(run / "front.png") as im:
        assert im.size == (700, 500)
    assert main(["report", str(run)]) == 0 and (run / "report.html").exists()
    capsys.readouterr()
    # Other axes get their own file; a second default plot says it replaced the first.
    assert main(["plot", str(run), "--x", "energy_j"]) == 0
    assert capsys.readouterr().out.strip() == \
        f"wrote {run / 'front_samples_per_joule_vs_energy_j.png'}"
    assert main(["plot", str(run)]) == 0
    assert "replacing the file that was there" in capsys.readouterr().out
    assert sorted(p.name for p in cwd.iterdir()) == ["front.png"]


def test_plot_unknown_metric_is_a_clear_error(run, tmp_path, capsys):
    rc = main(["plot", str(run), "--x", "acuracy", "-o", str(tmp_path / "f.png")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "unknown metric 'acuracy'" in err and "'accuracy'" in err
    assert "Traceback" not in err and not (tmp_path / "f.png").exists()


@pytest.mark.parametrize("cmd", ["report", "plot", "show"])
def test_not_a_study(tmp_path, capsys, cmd):
    rc = main([cmd, str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "is not an ecopt study: it has no study.json" in err
    assert main([cmd, str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_compare_with_not_a_study(run, tmp_path, capsys):
    assert main(["compare", str(run), str(tmp_path)]) == 2
    assert "not an ecopt study" in capsys.readouterr().err


def test_empty_study(tmp_path, capsys):
    path = make(tmp_path / "empty", n=0)
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning: the study has no finished trials yet" in err
    assert out.is_file()  # the spec is still shown
    assert main(["show", str(path)]) == 0
    o = capsys.readouterr()
    assert main(["show", str(path), "--strict"]) == 1  # warnings count as failure on demand
    assert "warning: the study has no finished trials yet" in capsys.readouterr().err
    assert "trials: 0 finished" in o.out and "objectives: accuracy [max]" in o.out
    assert "nothing to plot" not in o.err and "optimize() goes on from its log" in o.err
    # A trial started and never finished (the process was killed): show names it.
    with ecopt.Study(SPACE, OBJS, storage=path, sampler="random", meter="estimate") as s:
        s.ask()
        s._storage.close()  # as a kill leaves it: running.jsonl holds trial 0, no record
        s._storage = None
    assert main(["show", str(path)]) == 0
    o = capsys.readouterr()
    assert "no finished trials yet (1 started and not finished: trial(s) 0)" in o.err
    assert main(["plot", str(path), "-o", str(tmp_path / "f.png")]) == 2
    assert "nothing to plot" in capsys.readouterr().err
    assert not (tmp_path / "f.png").exists()


def test_only_failed_trials(tmp_path, capsys):
    def boom(trial):
        with trial.phase("train"):
            sum(range(1000))
        raise ValueError(f"bad lr {trial['x']:.2f}")

    path = make(tmp_path / "failed", n=3, fn=boom, fail_fast=None)
    assert main(["show", str(path)]) == 0
    o = capsys.readouterr()
    assert "3 failed" in o.out and "ValueError: bad lr" in o.out
    assert "failures: 3 trial(s) failed (ValueError at test_cli_report.py:" in o.out
    assert "no failed configuration was proposed again" in o.out
    assert "no trial completed within the constraints" in o.err and "Traceback" not in o.err
    assert main(["report", str(path), "--out", str(tmp_path / "r.html")]) == 0
    assert "bad lr" in (tmp_path / "r.html").read_text()
    capsys.readouterr()
    assert main(["plot", str(path), "-o", str(tmp_path / "f.png")]) == 2
    assert "nothing to plot" in capsys.readouterr().err
    # Failed trials still have energy and duration: that plot is drawn (with the warning).
    assert main(["plot", str(path), "--x", "duration_s", "--y", "energy_j",
                 "-o", str(tmp_path / "g.png")]) == 0
    assert (tmp_path / "g.png").is_file() and not (tmp_path / "f.png").exists()


def test_torn_last_line(run, tmp_path, capsys):
    dst = tmp_path / "torn"
    dst.mkdir()
    for f in ("study.json", "trials.jsonl"):
        (dst / f).write_bytes((run / f).read_bytes())
    with open(dst / "trials.jsonl", "ab") as f:
        f.write(b'{"number": 99, "sta')
    rc = main(["report", str(dst)])
    o = capsys.readouterr()
    assert rc == 0 and "torn last line" in o.err and "Traceback" not in o.err
    page = (dst / "report.html").read_text()
    assert "torn last line" in page and "Pareto front" in page
    assert main(["show", str(dst)]) == 0
    assert "Pareto front" in capsys.readouterr().out


def test_show_summary(run, capsys):
    assert main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    data = ecopt.report.build_report(run)
    assert "ENERGY IS ESTIMATED, NOT MEASURED" in out
    assert f"Pareto front ({len(data.front)} trials" in out
    for n in data.front:
        assert any(line.strip().startswith((f"{n} ", f"{n}* ")) for line in out.splitlines())
    assert "best per objective:" in out and "failed: RuntimeError: diverged" in out


def test_show_escapes_terminal_control_characters(run, tmp_path, capsys):
    dst = tmp_path / "ansi"
    dst.mkdir()
    spec = json.loads((run / "study.json").read_text())
    spec["name"] = "\x1b[2J\x1b[31mevil"
    (dst / "study.json").write_text(json.dumps(spec))
    (dst / "trials.jsonl").write_bytes((run / "trials.jsonl").read_bytes())
    assert main(["show", str(dst)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2J" in out


def test_compare(run, tmp_path, capsys):
    other = make(tmp_path / "other", n=6, seed=9)
    out = tmp_path / "cmp.png"
    assert main(["compare", str(run), str(other), "-o", str(out)]) == 0
    o = capsys.readouterr().out
    assert "shared reference point: accuracy=" in o and "(inferred from all studies)" in o
    assert "run" in o and "other" in o and "search energy J (estimated) (trials + proposals)" in o
    assert out.is_file()
    assert main(["compare", str(run), str(other), "--ref-point", "0,0"]) == 0
    assert "accuracy=0, samples_per_joule=0" in capsys.readouterr().out
    assert main(["compare", str(run), str(other), "--ref-point", "a,b"]) == 2
    assert "--ref-point must be comma-separated numbers" in capsys.readouterr().err
    third = make(tmp_path / "third", n=0, objectives=[ecopt.Objective("accuracy", "max"),
                                                      ecopt.Objective("energy", "min")])
    assert main(["compare", str(run), str(third)]) == 2
    assert "must share objectives" in capsys.readouterr().err


def test_console_script_never_prints_a_traceback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "ecopt.cli", "report", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.startswith("ecopt report: error:") and "Traceback" not in p.stderr


def test_hand_edited_log_and_unreadable_log(run, tmp_path, capsys):
    dst = tmp_path / "edited"
    dst.mkdir()
    (dst / "study.json").write_bytes((run / "study.json").read_bytes())
    lines = (run / "trials.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first.update(state="complete", values={"accuracy": "nan"}, error=None)
    (dst / "trials.jsonl").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    rc = main(["report", str(dst)])
    err = capsys.readouterr().err
    assert rc == 0 and "is marked complete but objective(s) ['accuracy', 'samples_per_joule']" in err
    assert "Traceback" not in err and (dst / "report.html").is_file()

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "study.json").write_bytes((run / "study.json").read_bytes())
    (broken / "trials.jsonl").mkdir()  # unreadable as a file
    rc = main(["show", str(broken)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("ecopt show: error: IsADirectoryError")
    assert "ECOPT_DEBUG=1" in err and "Traceback" not in err


def test_sobol_fallbacks_are_counted_in_red(tmp_path, capsys):
    # Two proposals of a model-based sampler, one of which fell back to Sobol.
    from ecopt.report import build_report, show_text
    from ecopt.report.html import render_html
    from ecopt.storage import StudyStorage
    from ecopt.trial import TrialRecord, TrialState

    path = make(tmp_path / "fb", n=2)
    st = StudyStorage(path)
    st.append_record(TrialRecord(number=10, state=TrialState.COMPLETE, params={"x": 0.1}, values={
        "accuracy": 0.5, "samples_per_joule": 3.0}, proposed_by="qlognehvi"))
    st.append_record(TrialRecord(number=11, state=TrialState.COMPLETE, params={"x": 0.2}, values={
        "accuracy": 0.4, "samples_per_joule": 2.0}, proposed_by="sobol",
        proposal={"fallback": "RuntimeError: fit failed"}))
    st.close()
    data = build_report(path)
    assert data.sobol_fallbacks == (11,) and data.model_proposals == 2
    assert "1 of 2 proposals fell back to Sobol" in show_text(data)
    assert "\x1b[31m1 of 2 proposals fell back to Sobol" in show_text(data, color=True)
    assert "\x1b" not in show_text(data)
    html = render_html(data, {})
    assert 'class="fallback"' in html and "1 of 2 proposals fell back to Sobol" in html
    assert main(["show", str(path)]) == 0
    assert "fell back to Sobol" in capsys.readouterr().out
