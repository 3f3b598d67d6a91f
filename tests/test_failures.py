"""What a failed trial says about the space (ecopt._failures): keys, regions, spread."""

from __future__ import annotations

import pytest

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


def _abc_study(**kw):
    sp = ecopt.SearchSpace({"k": ecopt.Categorical(["a", "b", "c"], ordered=True),
                            "n": ecopt.Int(1, 3)})
    return ecopt.Study(sp, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                       meter="estimate", seed=0, **kw)


def _abc(p) -> dict[str, float]:
    if p["k"] == "a" and p["n"] == 1:
        raise RuntimeError("boom")
    i = "abc".index(p["k"])
    return {"f1": p["n"] + i + 0.3 * p["n"], "f2": p["n"] + i + 0.3 * i}


def _loop(st, n: int, fn, batch: int = 1) -> None:
    done = 0
    while done < n:
        ts = st.ask(batch)
        for t in ts:
            try:
                st.tell(t, fn(t.params))
            except RuntimeError as exc:
                st.tell(t, exc)
        done += len(ts)


@pytest.mark.parametrize("batch", [1, 3])
def test_a_tried_out_discrete_space_never_repeats_a_failed_or_running_configuration(batch):
    """Nine configurations, one failing: once each has a trial the model repeats complete
    ones only, never the failed one nor one still running."""
    st = _abc_study(sampler=ecopt.samplers.QLogNEHVISampler(num_restarts=2, raw_samples=32))
    _loop(st, 15, _abc, batch)
    bad = [r.number for r in st.records if r.params == {"k": "a", "n": 1}]
    assert len(bad) == 1 and len(st.records) >= 15
    held = [st.ask() for _ in range(3)]  # running, not told
    keys = [tuple(sorted(t.params.items())) for t in held]
    assert len(set(keys)) == 3 and ("k", "a") not in [k[0] for k in keys if ("n", 1) in k]


def test_the_design_with_repeats_allowed_and_random_sobol_skip_failed_configurations():
    def fails_a(p):
        if p["k"] == "a":
            raise RuntimeError("boom")
        return {"f1": p["n"], "f2": "abc".index(p["k"])}

    for sampler in (ecopt.samplers.QLogNEHVISampler(n_init=6, allow_repeats=True,
                                                    num_restarts=2, raw_samples=32),
                    ecopt.samplers.RandomSampler(seed=0, n_sobol=8)):
        st = _abc_study(sampler=sampler)
        _loop(st, 8, fails_a)
        failed = [tuple(sorted(r.params.items())) for r in st.records
                  if r.state.value == "failed"]
        assert failed and len(failed) == len(set(failed)), (sampler.name, failed)


def test_a_configuration_never_started_is_proposed_again():
    """A batch stopped by fail_fast leaves trials NotStarted; they say nothing about their
    configuration, so the grid runs them once the objective is fixed."""
    sp = ecopt.SearchSpace({"bs": ecopt.Int(1, 8)})
    bug = [True]

    def fn(t):
        return {"f1": t["bs"], ("f_2" if bug[0] else "f2"): 1.0}

    st = ecopt.Study(sp, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                     sampler=ecopt.samplers.GridSampler(), meter="estimate", seed=0)
    with pytest.raises(ecopt.SystematicFailureError):
        st.optimize(fn, n_trials=8, batch_size=4, asynchronous=False)
    never = {r.params["bs"] for r in st.records if r.error and r.error.type == "NotStarted"}
    assert never
    bug[0] = False
    st.optimize(fn, n_trials=8)
    done = {r.params["bs"] for r in st.records if r.state.value == "complete"}
    assert never <= done
