"""--json and --strict across the ``ecopt`` subcommands, and quickstart's --proposals-per-round
(issue 28 item 7)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import ecopt
from ecopt.cli import NO_JSON, NO_STRICT, build_parser, main


def _subcommands() -> dict[str, object]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return dict(sub.choices)  # type: ignore[attr-defined]


def _flags(p: object) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}  # type: ignore[attr-defined]


def test_every_subcommand_has_strict_and_json_unless_listed_and_documented():
    from pathlib import Path

    cli_doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    for name, p in _subcommands().items():
        flags = _flags(p)
        if name == "gpu":  # its flags are on its action (ecopt gpu restore --json)
            flags = _flags(next(a for a in p._actions if a.dest == "gpu_command")  # type: ignore
                           .choices["restore"])
        assert ("--strict" in flags) == (name not in NO_STRICT), name
        assert ("--json" in flags) == (name not in NO_JSON), name
    # docs/cli.md's table says the same, row by row ("no: why" where a flag is missing).
    rows = {}
    for line in cli_doc.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`").split()[0]] = cells
    assert set(rows) == set(_subcommands())
    for name, cells in rows.items():
        assert cells[2].startswith("no") == (name in NO_JSON), name
        assert cells[3].startswith("no") == (name in NO_STRICT), name


def _objective(t: ecopt.Trial) -> dict[str, float]:
    with t.phase("train"):
        sum(range(200_000))
    return {"a": t["x"], "b": (1 - t["x"]) ** 2}


def _study(path, n=4):
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
    with ecopt.Study(space, [ecopt.Objective("a", "min"), ecopt.Objective("b", "min")],
                     storage=path, sampler="sobol", meter="estimate", seed=0) as s:
        s.optimize(_objective, n_trials=n, show_progress=False)
    return path


def test_show_compare_and_repair_print_json(tmp_path, capsys):
    a, b = _study(tmp_path / "a"), _study(tmp_path / "b", n=3)
    assert main(["show", str(a), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["counts"]["complete"] == 4 and got["front"] and got["warnings"] == []
    assert {o["name"] for o in got["objectives"]} == {"a", "b"}
    assert all(set(f) == {"trial", "params", "values", "energy_j"} for f in got["front"])
    assert got["energy_estimated"] is True and got["provenance"]
    assert main(["compare", str(a), str(b), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [s["trials"] for s in got["studies"]] == [4, 3]
    # repair: a lost study.json is rebuilt from its copy in the log.
    (a / "study.json").unlink()
    assert main(["repair", str(a), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["restored"].endswith("study.json") and (a / "study.json").exists()


def test_strict_turns_a_warning_into_exit_status_1(tmp_path, capsys):
    a = _study(tmp_path / "a")
    with open(a / "trials.jsonl", "a") as f:
        f.write('{"torn line\n')  # show warns about the skipped line
    assert main(["show", str(a)]) == 0
    assert main(["show", str(a), "--strict"]) == 1
    assert main(["show", str(a), "--json", "--strict"]) == 1
    capsys.readouterr()


def test_import_optuna_json_and_strict(tmp_path, capsys):
    optuna = pytest.importorskip("optuna")
    db = f"sqlite:///{tmp_path / 'o.db'}"
    st = optuna.create_study(study_name="s", directions=["minimize", "minimize"], storage=db,
                             sampler=optuna.samplers.RandomSampler(seed=0))
    st.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=3)
    st.enqueue_trial({"x": 0.5})  # a waiting trial: not carried over
    assert main(["import-optuna", db, str(tmp_path / "i"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["trials"] == {"complete": 3} and got["not_carried_over"]
    shutil.rmtree(tmp_path / "i")
    assert main(["import-optuna", db, str(tmp_path / "i"), "--strict"]) == 1


def test_quickstart_proposals_per_round_and_the_old_name(tmp_path, capsys):
    out = tmp_path / "qs"
    args = ["quickstart", "--epochs", "1", "--quiet", "--out", str(out), "--sampler", "sobol"]
    assert main([*args, "--trials", "2", "--proposals-per-round", "2", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["energy"] == "estimated" and sum(got["trials"].values()) == 2
    assert len(ecopt.load_study(out).records) == 2
    # The old name still works, says where it went, and --strict counts that warning
    # (a real process: pytest records warnings instead of showing them).
    p = subprocess.run([sys.executable, "-m", "ecopt.cli", *args, "--trials", "3",
                        "--batch-size", "2", "--strict"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 1, p.stderr
    assert "--batch-size is deprecated" in p.stderr and "--proposals-per-round 2" in p.stderr
    assert len(ecopt.load_study(out).records) == 3
    assert main([*args, "--trials", "3", "--batch-size", "2",
                 "--proposals-per-round", "3"]) == 2
    assert "give one" in capsys.readouterr().err
