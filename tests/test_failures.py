"""What a failed trial says about the space (ecopt._failures): keys, regions, spread."""

from __future__ import annotations

import ecopt
from ecopt._failures import counts_as_failure, enclosed, error_key, split
from ecopt.trial import ErrorInfo, Intermediate, TrialRecord, TrialState

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "kind": ecopt.Categorical(["a", "b", "c"]),
                           "y": ecopt.Float(0, 1)})


def tb(line: int, path: str = "/home/u/notebook.py") -> str:
    return (f'Traceback (most recent call last):\n  File "/lib/ecopt/trial.py", line 9, in run\n'
            f'    out = objective(trial)\n  File "{path}", line {line}, in objective\n'
            '    raise RuntimeError("NaN loss")\nRuntimeError: NaN loss\n')


def rec(n: int, x: float, kind: str, y: float = 0.5, state: str = "complete",
        err: ErrorInfo | None = None, **kw) -> TrialRecord:
    st = TrialState(state)
    if st is TrialState.FAILED and err is None:
        err = ErrorInfo("RuntimeError", f"NaN loss at x={x}", tb(12))
    values = {"f1": x, "f2": y} if st is TrialState.COMPLETE else {}
    return TrialRecord(number=n, state=st, params={"x": x, "kind": kind, "y": y},
                       values=values, error=err, **kw)


def test_the_error_key_is_the_type_and_the_raising_line_not_the_message():
    a = rec(0, 0.9, "c", state="failed")
    b = rec(1, 0.95, "c", state="failed")  # another message, same line
    assert a.error.message != b.error.message
    assert error_key(a) == error_key(b) == ("RuntimeError", "notebook.py:12")
    c = rec(2, 0.9, "c", state="failed", err=ErrorInfo("RuntimeError", "x", tb(13)))
    assert error_key(c) != error_key(a)
    assert error_key(rec(3, 0.1, "a", state="failed", err=ErrorInfo("ValueError", "v"))) == \
        ("ValueError", "")


def test_what_counts_as_a_failure():
    assert counts_as_failure(rec(0, 0.9, "c", state="failed"))
    for why in ("Interrupted", "WorkerLost", "NotStarted", "KeyboardInterrupt"):
        assert not counts_as_failure(rec(0, 0.9, "c", state="failed", err=ErrorInfo(why, "")))
    assert not counts_as_failure(rec(0, 0.9, "c"))
    assert not counts_as_failure(rec(0, 0.9, "c", state="infeasible",
                                     err=ErrorInfo("Infeasible", "oom")))
    assert counts_as_failure(TrialRecord(number=0, state=TrialState.PRUNED,
                                         params={"x": 0.1, "kind": "a", "y": 0.1}))
    assert not counts_as_failure(TrialRecord(
        number=0, state=TrialState.PRUNED, params={"x": 0.1, "kind": "a", "y": 0.1},
        values={"f1": 1.0}, intermediate=(Intermediate(0, {"f1": 1.0}, 1.0, 1.0),)))


def test_failures_with_no_success_between_them_form_a_region():
    ok = [rec(0, 0.2, "c"), rec(1, 0.5, "a"), rec(2, 0.9, "a")]
    region = [rec(3, 0.9, "c", 0.1, "failed"), rec(4, 0.97, "c", 0.9, "failed")]
    s = split(SPACE, ok + region)
    assert [r.number for r in s.regional] == [3, 4] and s.isolated == []
    assert len(s.params) == 2


def test_an_isolated_failure_does_not_condemn_its_region():
    ok = [rec(0, 0.5, "a", 0.5), rec(1, 0.2, "b", 0.2), rec(2, 0.8, "b", 0.8)]
    # Same error at two far points with a success in their box: a flaky node, twice.
    flaky = [rec(3, 0.1, "b", 0.1, "failed"), rec(4, 0.9, "b", 0.9, "failed")]
    s = split(SPACE, ok + flaky)
    assert s.regional == [] and [r.number for r in s.isolated] == [3, 4]
    # A single failure is isolated too.
    assert [r.number for r in split(SPACE, ok + flaky[:1]).isolated] == [3]


def test_different_errors_never_make_a_region_together():
    other = ErrorInfo("ValueError", "shape", tb(40))
    s = split(SPACE, [rec(0, 0.2, "a"), rec(1, 0.9, "c", 0.1, "failed"),
                      rec(2, 0.95, "c", 0.2, "failed", err=other)])
    assert s.regional == [] and len(s.isolated) == 2


def test_enclosed_finds_a_success_inside_the_failures_box():
    fails = [rec(3, 0.1, "a", 0.1, "failed"), rec(4, 0.9, "b", 0.9, "failed")]
    inside, outside = rec(0, 0.5, "a", 0.5), rec(1, 0.5, "c", 0.5)
    assert enclosed(SPACE, fails, [outside, inside]) is inside
    assert enclosed(SPACE, fails, [outside]) is None  # category c is not in the box


def test_the_show_summary_counts_errors_regions_weights_and_repeats():
    from ecopt.report.data import failure_line, failure_summary

    note = {"failed": 2, "pending": 2, "regional": 2, "isolated": 0, "modelled": True,
            "p_failure": 0.03, "nearest_failure": 0.2}
    recs = [rec(0, 0.9, "c", state="failed"), rec(1, 0.2, "a"), rec(2, 0.95, "c", state="failed"),
            TrialRecord(number=3, state=TrialState.COMPLETE, params={"x": 0.5, "kind": "a",
                        "y": 0.5}, values={"f1": 0.5, "f2": 0.5}, proposal={"failures": note}),
            rec(4, 0.9, "c", state="failed")]  # the configuration of trial 0, again
    s = failure_summary(recs)
    assert s["failed"] == 3 and s["errors"] == {"RuntimeError at notebook.py:12": 3}
    assert s["regional"] == 2 and s["weighted"] == 1 and s["max_p_failure"] == 0.03
    assert s["repeated"] == 1
    line = failure_line(s)
    assert line.startswith("failures: 3 trial(s) failed (RuntimeError at notebook.py:12 x3)")
    assert "1 trial(s) repeated a failed configuration" in line
    assert failure_summary(recs[1:2]) is None
