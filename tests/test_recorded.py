"""Recorded runs: summary.json/summary.md written and read back, cells rendered by the one rule."""

from __future__ import annotations

import json
import math

import pytest

from docs.recorded import (
    Table,
    estimated_energy,
    interval,
    read_run,
    render_table,
    results_dir,
    write_run,
)


def _run(tmp_path, **kw):
    t = Table(["backend", "epoch s", "energy J (ESTIMATED)", "n"],
              [["polars", interval(1.23456789, 1.1, 1.4), 12345.0, 5],
               ["pan|das", 0.000123456789, math.nan, None]])
    return write_run(tmp_path / "run", script="benchmarks/demo.py",
                     command="python benchmarks/demo.py --repeats 5", tables={"epochs": t},
                     energy=estimated_energy("shared machine"), title="Demo",
                     notes=["the machine was shared"], facts={"wall_s": 1.23456789},
                     date="2026-12-04", extra_libraries=["pytest"]), t


def test_round_trip_and_provenance(tmp_path):
    run, _ = _run(tmp_path)
    back = read_run(tmp_path / "run")
    assert back.tables["epochs"] == run.tables["epochs"]
    assert back.to_dict() == run.to_dict()
    d = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert list(d)[:8] == ["script", "command", "date", "git_commit", "git_dirty", "versions",
                           "machine", "energy"]
    assert d["date"] == "2026-12-04" and len(d["git_commit"]) == 40
    assert {"python", "ecopt", "torch", "pytest"} <= set(d["versions"])
    assert d["energy"]["measured"] is False and "ESTIMATED" in d["energy"]["note"]
    # Floats keep 6 significant digits; NaN becomes null (JSON has no NaN).
    assert d["tables"]["epochs"]["rows"][0][1] == {"value": 1.23457, "low": 1.1, "high": 1.4}
    assert d["tables"]["epochs"]["rows"][1][2] is None
    assert d["facts"]["wall_s"] == 1.23457
    # Writing again what was read gives the same bytes (deterministic files).
    again = write_run(tmp_path / "again", script=back.script, command=back.command,
                      tables=back.tables, energy=back.energy, title="Demo", notes=back.notes,
                      facts=back.facts, date=back.date, extra_libraries=["pytest"])
    assert (tmp_path / "again" / "summary.json").read_text() == \
        (tmp_path / "run" / "summary.json").read_text()
    assert again.tables == back.tables


def test_markdown_uses_fmt_number(tmp_path):
    run, _ = _run(tmp_path)
    md = render_table(run.tables["epochs"])
    assert md.splitlines() == [
        "| backend | epoch s | energy J (ESTIMATED) | n |",
        "|---|---|---|---|",
        "| polars | 1.235 [1.1, 1.4] | 12,345 | 5 |",
        "| pan\\|das | 0.0001235 | - | - |",
    ]
    text = (tmp_path / "run" / "summary.md").read_text()
    assert text.startswith("# Demo\n")
    for part in ("`python benchmarks/demo.py --repeats 5`", "ESTIMATED by meter `estimate`",
                 "note: the machine was shared", "### epochs", md):
        assert part in text


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="row 0 has 1"):
        Table(["a", "b"], [[1]])
    with pytest.raises(ValueError, match="table ids"):
        write_run(tmp_path, script="s", command="c", tables={"a b": Table(["x"], [])}, energy=None)
    with pytest.raises(ValueError, match="'meter' and 'measured'"):
        write_run(tmp_path, script="s", command="c", tables={}, energy={"note": "x"})
    with pytest.raises(FileNotFoundError, match="summary.json"):
        read_run(tmp_path / "nothing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "summary.json").write_text('{"script": "x"}')
    with pytest.raises(ValueError, match="keys .* missing"):
        read_run(tmp_path / "bad")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        results_dir("plumber", date="04-12-2026")
    assert results_dir("plumber", tag="m4", date="2026-12-04").as_posix() == \
        "docs/results/plumber/2026-12-04-m4"


def test_versions_table_sets_this_run_beside_the_study():
    import importlib.metadata as md

    from docs.recorded import versions_table

    t = versions_table(("pandas", "surely-not-installed-pkg"), study={"pandas": "1.5.3"})
    assert list(t.columns) == ["library", "this run", "study"]
    assert [list(r) for r in t.rows] == [["pandas", md.version("pandas"), "1.5.3"],
                      ["surely-not-installed-pkg", "not installed",
                       "not given in the study material available here"]]
