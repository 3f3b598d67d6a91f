"""Every table in docs/ agrees with the recorded run it names (python -m docs.tables --check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from docs.recorded import (
    Table,
    adopt_tables,
    check_docs,
    marker_block,
    render_markers,
    update_docs,
    write_run,
)

REPO = Path(__file__).resolve().parents[1]


def test_every_doc_table_matches_its_recorded_run():
    problems = check_docs(REPO / "docs")
    assert not problems, "\n".join(map(str, problems)) + \
        "\nrun `python -m docs.tables` to regenerate the tables from docs/results"


def _setup(tmp_path):
    results = tmp_path / "docs" / "results"
    write_run(results / "demo" / "2026-12-04", script="benchmarks/demo.py", command="python x",
              tables={"t": Table(["k", "v"], [["a", 1.5], ["b", 12345.0]])}, energy=None)
    good = marker_block("demo/2026-12-04#t", results)
    return results, good


def test_check_finds_wrong_missing_and_unclosed_tables(tmp_path):
    results, good = _setup(tmp_path)
    wrong = good.replace("12,345", "12,300")
    page = tmp_path / "docs" / "page.md"
    page.write_text("\n\n".join([
        "# Page", good, wrong,
        "<!-- table: demo/2026-12-05#t -->\n| x |\n<!-- /table -->",
        "<!-- table: demo/2026-12-04#nope -->\n<!-- /table -->",
        "<!-- table: demo/2026-12-04#t -->\nnever closed",
    ]) + "\n")
    problems = check_docs(tmp_path / "docs", results)
    assert [(p.line, p.message.split(" (")[0]) for p in problems] == [
        (10, "differs from the recorded run"),
        (17, "no recorded run at "
             f"'{results / 'demo' / '2026-12-05' / 'summary.json'}'"),
        (21, f"'{results / 'demo' / '2026-12-04' / 'summary.json'}' has no table 'nope'"),
        (24, "no '<!-- /table -->' closes this block"),
    ]
    # The command line says the same and exits non-zero, without writing.
    before = page.read_text()
    res = subprocess.run([sys.executable, "-m", "docs.tables", "--check", "--docs",
                          str(tmp_path / "docs")], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 1 and res.stdout.count("page.md:") == 4, res.stdout + res.stderr
    assert page.read_text() == before
    # Regenerating fixes the wrong block; the broken references stay reported.
    changed, left = update_docs(tmp_path / "docs", results)
    assert changed == [page] and len(left) == 3
    assert page.read_text().count(good) == 2


def test_a_correct_page_passes_and_is_left_alone(tmp_path):
    results, good = _setup(tmp_path)
    text = f"intro\n\n{good}\n\nafter\n"
    new, problems = render_markers(text, results)
    assert new == text and problems == []
    assert good.splitlines()[1:4] == ["| k | v |", "|---|---|", "| a | 1.5 |"]


def test_adopt_wraps_hand_tables_equal_to_a_recorded_one(tmp_path):
    results, good = _setup(tmp_path)
    body = "\n".join(good.splitlines()[1:-1])
    hand = body.replace("| a | 1.5 |", "|  a  |  1.5 |")  # spacing does not matter
    other = body.replace("12,345", "12,300")
    text = f"# Page\n\n{hand}\n\ntext\n\n{other}\n\n{good}\n"
    new, adopted, near = adopt_tables(text, results)
    assert adopted == ["line 3: demo/2026-12-04#t"]
    assert near == ["line 10: same columns as demo/2026-12-04#t, rows differ"]
    assert new.count("<!-- table: demo/2026-12-04#t -->") == 2  # the adopted one + the existing
    page = tmp_path / "docs" / "p.md"
    page.write_text(new.replace(hand, body))
    assert [p.message for p in check_docs(tmp_path / "docs", results)] == []
