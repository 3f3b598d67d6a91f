"""One number-formatting rule for every report, CLI command and progress line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ecopt.fmt import fmt_number, safe_text


@pytest.mark.parametrize("value, text", [
    (12345.0, "12,345"), (12345, "12,345"), (np.int64(12345), "12,345"),
    (np.float64(12345.0), "12,345"), (12345.6, "12,346"), (1036.4, "1,036"), (999.94, "999.9"),
    (0.123456, "0.1235"),
    (1.5e-5, "1.5e-05"), (2.3e16, "2.3e+16"), (1.0, "1"), (-0.0, "0"), (-2.5, "-2.5"),
    (None, "-"), (math.nan, "-"), (np.float32("nan"), "-"), (math.inf, "inf"),
    (-math.inf, "-inf"), (True, "True"), ("text", "text"),
])
def test_fmt_number(value, text):
    assert fmt_number(value) == text


def test_every_report_layer_uses_the_rule(tmp_path):
    # 12345.0 J of search energy reads the same in the terminal summary, the HTML and the payback.
    import ecopt
    from ecopt.meters.base import ComponentEnergy, Measurement
    from ecopt.report import build_report, show_text
    from ecopt.report.html import render_html
    from ecopt.trial import PhaseRecord, TrialRecord, TrialState

    m = Measurement(2.0, {"cpu": ComponentEnergy(12345.0, "estimate-cpu-time", False)}, "estimate")
    st = ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1)}),
                     [ecopt.Objective("a", "max"), ecopt.Objective("b", "max")],
                     storage=tmp_path / "s", sampler="random", meter="wallclock")
    st._storage.append_record(TrialRecord(number=0, state=TrialState.COMPLETE, params={"x": 0.5},
                                          values={"a": 1.0, "b": 2.0},
                                          phases={"train": PhaseRecord("train", m)}))
    st.close()
    data = build_report(tmp_path / "s")
    assert "12,345 J" in show_text(data)
    assert "12,345 J" in render_html(data, {})
    assert "1.234e+04" not in show_text(data) + render_html(data, {})


@pytest.mark.parametrize(("text", "shown"), [
    ("plain ünïcode", "plain ünïcode"),
    ("a\x1b[31mb", "a\\x1b[31mb"),
    ("s\u202ename", "s\\u202ename"),
    ("\u2066x\u2069", "\\u2066x\\u2069"),
])
def test_safe_text_writes_controls_and_bidi_controls_out(text, shown):
    assert safe_text(text) == shown
