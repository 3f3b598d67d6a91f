"""Every verdict of docs/seeds.md's findings rows is the one rule's, on its recorded run.

docs/findings.py ties each row to the recorded cells its verdicts come from; here every
row must have an entry, every entry a row, every check's ``**verdict** label`` phrase
must be in its row, and the row may state no other verdict. Recorded verdict columns
themselves are checked against the rule by ``python -m docs.verdicts --check``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs import findings, verdicts
from ecopt._verdict import VERDICTS

SEEDS = Path(__file__).resolve().parents[1] / "docs" / "seeds.md"
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _rows() -> dict[str, str]:
    rows = findings.findings_rows(SEEDS.read_text(encoding="utf-8"))
    claims = [c for c, _ in rows]
    assert len(claims) == len(set(claims)), "two findings rows state the same claim"
    return dict(rows)


def test_every_findings_row_has_an_entry_and_every_entry_a_row():
    rows = _rows()
    entries = {f.claim for f in findings.FINDINGS}
    assert sorted(set(rows) - entries) == [], "findings rows without an entry in docs/findings.py"
    assert sorted(entries - set(rows)) == [], "entries of docs/findings.py without a row"


@pytest.mark.parametrize("finding", findings.FINDINGS, ids=lambda f: f.claim[:50])
def test_no_row_states_a_verdict_its_run_does_not_give(finding):
    cell = _rows()[finding.claim]
    phrases = finding.phrases()
    for p in phrases:
        assert p in cell, f"{finding.claim!r}: the rule gives {p!r}; the row says {cell!r}"
    stated = [b for b in _BOLD.findall(cell) if b in (*VERDICTS, findings.CANNOT)]
    given = _BOLD.findall(" ".join(phrases))
    assert sorted(stated) == sorted(given), (
        f"{finding.claim!r}: the row states {stated}, its checks give {given}")


def test_experiments_page_has_no_findings_row_outside_the_mapping():
    """docs/experiments.md states its GPU figures in generated tables; a findings table with
    a verdict column there would need entries in docs/findings.py too."""
    page = SEEDS.parent / "experiments.md"
    entries = {f.claim for f in findings.FINDINGS}
    rows = findings.findings_rows(page.read_text(encoding="utf-8"))
    assert [c for c, _ in rows if c not in entries] == []


def test_recorded_verdict_columns_follow_the_rule():
    assert verdicts.check() == []


def test_a_check_that_disagrees_with_its_row_fails(tmp_path):
    """The test can fail: a stronger word than the run gives is caught."""
    f = next(f for f in findings.FINDINGS if f.claim.startswith("polars spends less"))
    cell = _rows()[f.claim].replace("**not shown** at 300,000", "**does not hold** at 300,000")
    assert f.phrases()[0] not in cell
