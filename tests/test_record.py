"""One record type, built in one place; the trial log reads both ways (docs/trial-log.md)."""

from __future__ import annotations

import json

import pytest

import ecopt
from ecopt._record import create_record, interrupted_record
from ecopt.trial import ErrorInfo, TrialOutcome, TrialRecord, TrialState

# A line written by the release before the record builder (ecopt 47a50ec), verbatim.
OLD_LINE = (
    '{"number":0,"state":"complete","params":{"x":0.6369616873214543},"values":{"f1":'
    '0.6369616873214543,"f2":0.3630383126785457},"metrics":{"loss":0.25},"feasible":true,'
    '"phases":{"train":{"duration_s":2.3300000066228677e-05,"energy_j":0.00028041421957237985,'
    '"measured":false,"meter":"estimate","components":{"cpu":{"energy_j":0.00028000000000000247,'
    '"source":"estimate-cpu-time","measured":false,"note":"2.8e-05 CPU-s x 10 W/core (process)"},'
    '"ram":{"energy_j":4.142195723773912e-07,"source":"estimate-ram","measured":false,"note":'
    '"0.0474 GB RSS x 0.375 W/GB"}},"details":{"meter":"estimate","measured":false,'
    '"cpu_w_per_core":10.0,"ram_w_per_gb":0.375,"scope":"process","model":"cpu_time_s * '
    'cpu_w_per_core + rss_gb * ram_w_per_gb * duration_s"},"extras":{},"count":1,"samples":10}},'
    '"energy_j":0.00028041421957237985,"started_at":"2026-12-04T16:48:36.276+00:00","duration_s":'
    '0.0052793410000049334,"proposed_by":"random","proposal":{"search":{"energy_j":'
    '0.09220971911640577,"duration_s":0.08042221499999869,"measured":false,"source":'
    '"cpu=estimate-cpu-time;ram=estimate-ram","meter":"estimate","batch":1}},"error":null,'
    '"host":"vm","worker":"pid:21089","device":"","noise":{},"user_attrs":{"note":"old"},'
    '"intermediate":[{"step":1,"values":{"f1":0.5},"energy_j":0.00028041421957237985,'
    '"duration_s":0.0006572620000042662,"measured":false}]}')

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def _objective(t: ecopt.Trial) -> dict[str, float]:
    with t.phase("train", samples=10):
        sum(range(1000))
    t.report(1, {"f1": 0.5})
    t.set_metric("loss", 0.25)
    t.set_user_attr("note", "new")
    return {"f1": t["x"], "f2": 1 - t["x"]}


def test_an_old_line_opens_and_a_new_line_keeps_its_keys(tmp_path):
    old = TrialRecord.from_dict(json.loads(OLD_LINE))
    assert old.state is TrialState.COMPLETE and old.metrics == {"loss": 0.25}
    assert old.phases["train"].samples == 10 and old.intermediate[0].values == {"f1": 0.5}
    with ecopt.Study(SPACE, OBJS, storage=tmp_path / "s", sampler="random",
                     meter="estimate") as st:
        st.optimize(_objective, n_trials=1, show_progress=False)
    new = json.loads((tmp_path / "s" / "trials.jsonl").read_text().splitlines()[0])
    was = json.loads(OLD_LINE)
    assert list(new) == list(was)  # the same keys, in the same order
    for key in ("phases", "proposal", "intermediate"):
        first = new[key]["train"] if key == "phases" else new[key]["search"] \
            if key == "proposal" else new[key][0]
        then = was[key]["train"] if key == "phases" else was[key]["search"] \
            if key == "proposal" else was[key][0]
        assert list(first) == list(then), key
    # Round trip: a record read back writes the line it was read from.
    assert TrialRecord.from_dict(new).to_dict() == new
    # An old line appended to a new study's log is read with the rest.
    with open(tmp_path / "s" / "trials.jsonl", "a") as f:
        f.write(OLD_LINE.replace('"number":0', '"number":7') + "\n")
    assert [r.number for r in ecopt.load_study(tmp_path / "s").records] == [0, 7]


def test_records_and_outcomes_are_built_by_keyword_only():
    with pytest.raises(TypeError):
        TrialRecord(0, TrialState.COMPLETE, {"x": 0.1})  # type: ignore[misc]
    with pytest.raises(TypeError):
        TrialOutcome(0, None)  # type: ignore[misc]


def test_create_record_validates_values_and_keeps_what_the_trial_measured():
    st = ecopt.Study(SPACE, OBJS, sampler="random", meter="estimate")
    t = st.ask()
    with t.phase("train", samples=3):
        pass
    t.report(1, {"f1": 0.4})
    ok = create_record(number=t.number, params=t.params, proposed_by=t.proposed_by,
                       proposal=t.proposal, outcome=TrialOutcome.of(t, returned={"f1": 1, "f2": 2}),
                       objectives=OBJS, constraints=[])
    assert ok.state is TrialState.COMPLETE and ok.values == {"f1": 1.0, "f2": 2.0}
    assert ok.phases["train"].samples == 3 and ok.intermediate == tuple(t.intermediate)
    bad = create_record(number=1, params={"x": 0.5}, proposed_by="user", proposal={},
                        outcome=TrialOutcome.of(t, returned={"f1": float("nan"), "f2": 1}),
                        objectives=OBJS, constraints=[])
    assert bad.state is TrialState.FAILED and "must be finite" in bad.error.message
    pruned = create_record(number=2, params={"x": 0.5}, proposed_by="user", proposal={},
                           outcome=TrialOutcome.of(t), objectives=OBJS, constraints=[],
                           state=TrialState.PRUNED)
    assert pruned.values == {"f1": 0.4} and pruned.error.type == "TrialPruned"
    st.tell(t, values={"f1": 1, "f2": 2})


def test_an_interrupted_trial_is_recorded_through_the_same_builder():
    rec = interrupted_record(
        4, {"params": {"x": 0.5}, "proposed_by": "sobol", "started_at": "t0"},
        [{"report": {"step": 1, "values": {"f1": 0.3}, "energy_j": 2.0, "duration_s": 1.0}},
         {"report": "torn"}], OBJS, [])
    assert rec.state is TrialState.FAILED and rec.interrupted and not rec.feasible
    assert rec.params == {"x": 0.5} and rec.proposed_by == "sobol" and len(rec.intermediate) == 1
    assert rec.error == ErrorInfo("Interrupted", rec.error.message) and "1 intermediate" in \
        rec.error.message
