"""One record type, built in one place; the trial log reads both ways (docs/trial-log.md)."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import ecopt
from ecopt._record import create_record, interrupted_record
from ecopt.record import ComponentEnergy, Intermediate, Measurement, PhaseRecord, make_record
from ecopt.storage import dumps
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


# -- ecopt/record.py: one constructor, the JSON from the fields --------------------------
#: Lines written by ecopt 8c5c78c (before the record moved to ecopt/record.py), verbatim but
#: for a shortened traceback: a complete trial whose samples/J came from a short window
#: (flags, notes, samples, a learning curve, unreliable) and a failed one (an error).
OLD_LOG = Path(__file__).with_name("trials_8c5c78c.jsonl")


def test_lines_of_the_previous_layout_are_rewritten_byte_for_byte():
    lines = OLD_LOG.read_text(encoding="utf-8").splitlines()
    records = [TrialRecord.from_dict(json.loads(line)) for line in lines]
    assert records[0].unreliable == ("inference",) and records[0].phases["inference"].short_window
    assert records[1].state is TrialState.FAILED and records[1].error.type == "RuntimeError"
    assert [dumps(r.to_dict()) for r in records] == lines


def _every_field_set() -> TrialRecord:
    m = Measurement(1.5, {"gpu:0": ComponentEnergy(3.0, "nvml-energy-counter", True, "n",
                                                   ("short-window",))},
                    "nvml", {"period_s": 0.1}, {"co2_kg": 1e-6})
    return make_record(
        number=3, state="pruned", params={"x": 0.5, "k": 2, "c": "a", "b": True},
        values={"f1": 0.5}, metrics={"m": 2.0}, feasible=False,
        phases={"train": PhaseRecord("train", m, 2, 0)}, started_at="2026-12-06T00:00:00.000+00:00",
        duration_s=2.5, proposed_by="qlognehvi", proposal={"ref": [1, 2]},
        error=ErrorInfo("TrialPruned", "stopped", "tb"), host="h", worker="pid:1", device="0",
        noise={"f1": 0.1}, user_attrs={"u": {"a": [1]}},
        intermediate=[Intermediate(1, {"f1": 0.5}, 1.0, 0.5, True)], unreliable=["train"])


def test_to_dict_and_from_dict_follow_every_field():
    rec = _every_field_set()
    for f in dataclasses.fields(TrialRecord):  # the record above sets every field
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING \
            else f.default
        assert getattr(rec, f.name) != default, f"set {f.name} in _every_field_set"
    d = rec.to_dict()
    assert [k for k in d if k != "energy_j"] == [f.name for f in dataclasses.fields(TrialRecord)]
    assert d["energy_j"] == 3.0 and d["phases"]["train"]["samples"] == 0  # 0 is kept, not omitted
    assert TrialRecord.from_dict(json.loads(dumps(d))) == rec
    for part in (rec.phases["train"].measurement, rec.phases["train"].measurement.components["gpu:0"],
                 rec.intermediate[0], rec.error):
        assert type(part).from_dict(json.loads(json.dumps(part.to_dict()))) == part
    assert PhaseRecord.from_dict("train", rec.phases["train"].to_dict()) == rec.phases["train"]
    # Empty optional parts stay out of the line, as before.
    bare = make_record(number=0, state=TrialState.COMPLETE, params={})
    assert "intermediate" not in bare.to_dict() and "unreliable" not in bare.to_dict()


def test_make_record_copies_and_normalises_what_it_is_given():
    params = {"x": np.float64(0.25), "k": np.int64(3)}
    rec = make_record(number=np.int64(1), state="complete", params=params, values={"f": 1},
                      unreliable=["a"])
    params["x"] = 9.0
    assert rec.params == {"x": 0.25, "k": 3} and type(rec.params["k"]) is int
    assert rec.state is TrialState.COMPLETE and type(rec.number) is int
    assert rec.values == {"f": 1.0} and type(rec.values["f"]) is float
    assert rec.unreliable == ("a",)


@pytest.mark.parametrize("fields, message", [
    ({"state": "running"}, "'state' must be one of"),
    ({"number": 1.5}, "'number' must be an integer, got 1.5"),
    ({"params": {"x": [1, 2]}}, "param 'x' must be a number, string or bool"),
    ({"values": {"f": "high"}}, "values['f'] must be a number, got 'high'"),
    ({"feasible": "yes"}, "'feasible' must be a bool"),
    ({"phases": {"train": {"duration_s": 1.0}}}, "'phases' must be a dict of PhaseRecord"),
    ({"error": "boom"}, "'error' must be None or an ErrorInfo"),
    ({"unreliable": "train"}, "'unreliable' must be a list of phase names"),
    ({"intermediate": [{"step": 1}]}, "'intermediate' must be a list of Intermediate"),
])
def test_make_record_names_the_field_that_does_not_fit(fields, message):
    with pytest.raises(ValueError) as info:
        make_record(**{"number": 0, "state": "complete", "params": {}, **fields})
    assert message in str(info.value)


def test_make_record_refuses_unknown_and_missing_fields():
    with pytest.raises(TypeError, match=r"unknown field\(s\) \['energy'\]"):
        make_record(number=0, state="complete", params={}, energy=1.0)
    with pytest.raises(TypeError, match="needs 'state'"):
        make_record(number=0, params={})


def test_records_are_made_in_one_place():
    """No module but ecopt/record.py calls ``TrialRecord(...)``: they all use make_record."""
    root = Path(ecopt.__file__).parent
    calls = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "record.py" and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                    node.func, "attr", None)) == "TrialRecord":
                calls.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert calls == []


def test_the_old_names_still_import_from_where_they_were():
    import ecopt.meters.base as meters_base
    import ecopt.record as record
    import ecopt.trial as trial

    for name in ("TrialRecord", "PhaseRecord", "TrialOutcome", "TrialState", "ErrorInfo",
                 "Intermediate", "with_state", "short_window", "excluded_reason",
                 "EXCLUDED_SHORT_WINDOW", "merge_measurements", "Measurement",
                 "ComponentEnergy"):
        assert getattr(trial, name) is getattr(record, name), name
    for name in ("Measurement", "ComponentEnergy", "FLAG_SHORT_WINDOW", "DEFAULT_MIN_WINDOW_S"):
        assert getattr(meters_base, name) is getattr(record, name), name
    assert ecopt.TrialRecord is record.TrialRecord and ecopt.Measurement is record.Measurement
