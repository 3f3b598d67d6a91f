"""Study(..., transfer_from=...): sources inform the model and initial design, never the log."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ecopt
from ecopt import Categorical, Float, Int, Objective, SearchSpace, Study
from ecopt.errors import TransferSourceError

OBJS = [Objective("a", "min"), Objective("b", "min")]


def _f(p: dict, scale: float = 1.0, offset: float = 0.0) -> dict[str, float]:
    x, y = p["x"], p.get("y", 0.5)
    return {"a": scale * ((x - 0.3) ** 2 + y) + offset,
            "b": scale * ((x - 0.7) ** 2 + (1 - y)) + offset}


def _source(path: Path, n: int = 10, fn=_f) -> Path:
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    s = Study(sp, OBJS, storage=path, meter="estimate", seed=1, sampler="sobol")
    for _ in range(n):
        t = s.ask()
        s.tell(t, fn(t.params))
    s.close()
    return path


def _run(study: Study, n: int, fn=_f) -> list:
    out = []
    for _ in range(n):
        t = study.ask()
        study.tell(t, fn(t.params))
        out.append(t)
    return out


def _shuffled(src: Path, dest: Path) -> Path:
    """A copy of study ``src`` with each objective's values permuted among its complete
    trials: values that mean nothing (an unrelated source)."""
    rows = [json.loads(x) for x in (src / "trials.jsonl").read_text().splitlines() if x]
    rng = np.random.default_rng(0)
    done = [i for i, r in enumerate(rows) if r.get("state") == "complete"]
    for key in ("a", "b"):
        vals = [rows[i]["values"][key] for i in done]
        for i, j in zip(done, rng.permutation(len(vals))):
            rows[i]["values"][key] = vals[j]
    dest.mkdir()
    (dest / "study.json").write_text((src / "study.json").read_text())
    (dest / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dest


def _f_mostly_x(p: dict) -> dict[str, float]:
    x, y = p["x"], p.get("y", 0.5)
    return {"a": 4 * (x - 0.3) ** 2 + 0.1 * y, "b": 4 * (x - 0.7) ** 2 + 0.1 * (1 - y)}


def test_other_bounds_extra_and_missing_parameter(tmp_path: Path) -> None:
    # x explains the source's values (y, which the new space lacks, hardly moves them):
    # otherwise, marginalised over y, the source would not predict itself and go unused
    src = _source(tmp_path / "src", fn=_f_mostly_x)
    # x has wider bounds, y exists only in the source, z only here.
    sp = SearchSpace({"x": Float(0.2, 2.0), "z": Int(1, 5)})
    st = Study(sp, OBJS, storage=tmp_path / "dst", meter="estimate", seed=0,
               transfer_from=[src])
    rec = json.loads((tmp_path / "dst" / "study.json").read_text())["transfer"][0]
    assert rec["rules"]["y"] == "source only: marginalised"
    assert rec["rules"]["z"].startswith("new only")
    assert rec["n_records"] == 10 and len(rec["hash"]) == 16 and rec["study_id"]
    trials = _run(st, 3, lambda p: _f(p, 2.0, 1.0))
    assert trials[0].proposed_by == "transfer"
    for t in trials:  # a source point takes the new parameter's centre
        assert 0.2 <= t.params["x"] <= 2.0
        assert t.params["z"] == 3 or t.proposed_by != "transfer"
    # the source's first Pareto point, clipped into [0.2, 2.0]
    src_study = ecopt.load_study(src)
    src_x = {round(max(0.2, r.params["x"]), 9) for r in src_study.best_trials()}
    assert round(trials[0].params["x"], 9) in src_x
    st.close()


def test_categorical_maps_by_value_and_unmatched_is_an_error(tmp_path: Path) -> None:
    sp = SearchSpace({"x": Float(0, 1), "opt": Categorical(["adam", "sgd"])})
    s = Study(sp, OBJS, storage=tmp_path / "src", meter="estimate", seed=1, sampler="sobol")
    _run(s, 8)
    s.close()
    sp2 = SearchSpace({"x": Float(0, 1), "opt": Categorical(["sgd", "lamb"])})
    st = Study(sp2, OBJS, meter="estimate", transfer_from=tmp_path / "src")
    src = st.transfer_sources[0]
    assert all(r.params["opt"] == "sgd" for r in src.records)
    assert src.dropped + len(src.records) == 8 and src.dropped > 0
    with pytest.raises(TransferSourceError, match="'opt' is categorical there and numeric"):
        Study(SearchSpace({"x": Float(0, 1), "opt": Float(0, 1)}), OBJS, meter="estimate",
              transfer_from=[tmp_path / "src"])
    with pytest.raises(TransferSourceError, match="objective 'a' is 'min' there and 'max'"):
        Study(sp2, [Objective("a", "max"), Objective("b", "min")], meter="estimate",
              transfer_from=[tmp_path / "src"])
    with pytest.raises(TransferSourceError, match="shares no objective"):
        Study(sp2, [Objective("c", "min"), Objective("d", "min")], meter="estimate",
              transfer_from=[tmp_path / "src"])



def test_listed_numeric_choices_match_a_numeric_parameter_by_value(tmp_path: Path) -> None:
    """A power limit listed as choices on one GPU and stepped on the other (the Zeus traces)."""
    sp = SearchSpace({"x": Float(0, 1), "w": Categorical([100, 150, 200, 250])})
    s = Study(sp, OBJS, storage=tmp_path / "src", meter="estimate", seed=1, sampler="sobol")
    _run(s, 8)
    s.close()
    # Listed -> stepped: values are kept (clipped into the new bounds).
    st = Study(SearchSpace({"x": Float(0, 1), "w": Int(125, 300, step=25)}), OBJS,
               meter="estimate", transfer_from=[tmp_path / "src"])
    got = [r.params["w"] for r in st.transfer_sources[0].records]
    assert len(got) == 8 and set(got) <= {125, 150, 200, 250} and 125 in got
    # Stepped -> listed: a value among the new choices maps, the others are dropped.
    sp3 = SearchSpace({"x": Float(0, 1), "w": Categorical([150, 250, 300])})
    st3 = Study(sp3, OBJS, meter="estimate", transfer_from=[tmp_path / "src"])
    src = st3.transfer_sources[0]
    assert {r.params["w"] for r in src.records} <= {150, 250} and src.dropped > 0

def test_source_trials_never_enter_the_new_study(tmp_path: Path, capsys) -> None:
    src = _source(tmp_path / "src", n=12)
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    st = Study(sp, OBJS, storage=tmp_path / "dst", meter="estimate", seed=0,
               transfer_from=[src])
    _run(st, 9)
    assert len(st.records) == 9 and [r.number for r in st.records] == list(range(9))
    assert all(r.number >= 0 for r in st.best_trials())
    lines = (tmp_path / "dst" / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 9
    df = st.trials_dataframe()
    assert len(df) == 9
    st.close()
    # the source is untouched
    assert len((src / "trials.jsonl").read_text().splitlines()) == 12
    from ecopt.cli import main

    capsys.readouterr()
    assert main(["show", str(tmp_path / "dst")]) == 0
    shown = capsys.readouterr().out
    assert "transfer sources (1" in shown and str(src) in shown
    assert "trials: 9 finished" in shown
    from ecopt.report.html import write_report

    html = write_report(tmp_path / "dst", tmp_path / "r.html")[0].read_text()
    assert 'id="transfer"' in html and "trust now" in html


def test_reopen_reproduces_proposals_and_missing_source_is_an_error(tmp_path: Path) -> None:
    src = _source(tmp_path / "src")
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    a = Study(sp, OBJS, storage=tmp_path / "a", meter="estimate", seed=0, transfer_from=[src])
    _run(a, 6)
    a.close()
    straight = Study(sp, OBJS, storage=tmp_path / "s", meter="estimate", seed=0,
                     transfer_from=[src])
    _run(straight, 6)
    nxt = straight.ask().params
    straight.close()
    # reopened without transfer_from: the recorded source is used again
    b = Study(sp, OBJS, storage=tmp_path / "a", meter="estimate", seed=0)
    assert b.transfer_sources and b.transfer_sources[0].hash == \
        json.loads((tmp_path / "a" / "study.json").read_text())["transfer"][0]["hash"]
    again = b.ask().params
    assert again == pytest.approx(nxt)
    b.close()
    # the source grew: its first 10 records are used, so proposals do not change
    grow = Study(SearchSpace({"x": Float(0, 1), "y": Float(0, 1)}), OBJS, storage=src,
                 meter="estimate", seed=1, sampler="sobol")
    _run(grow, 2)
    grow.close()
    c = Study(sp, OBJS, storage=tmp_path / "a", meter="estimate", seed=0)
    assert c.transfer_sources[0].n_records == 10
    c.close()
    # the source is gone: a clear error naming it
    (src / "study.json").rename(src / "moved.json")
    with pytest.raises(TransferSourceError, match="not a study directory"):
        Study(sp, OBJS, storage=tmp_path / "a", meter="estimate", seed=0)
    with pytest.raises(TransferSourceError, match="not a study directory"):
        Study(sp, OBJS, meter="estimate", transfer_from=[tmp_path / "nowhere"])


def test_transfer_map_relative_moves_a_power_limit_to_the_same_share_of_the_range(
        tmp_path: Path) -> None:
    """A40 power limits (100-300 W) onto a V100 (100-250 W): by share of the range, the
    nearest allowed value, ties to the lower; recorded, reused on reopen, and checked."""
    from ecopt.transfer import map_relative

    a40 = SearchSpace({"x": Float(0, 1), "w": Int(100, 300, step=25)})
    s = Study(a40, OBJS, storage=tmp_path / "src", meter="estimate", seed=1, sampler="sobol")
    for w in range(100, 301, 25):  # every power limit once
        t = s.ask(params={"x": (w - 100) / 200, "w": w})
        s.tell(t, {"a": 1 + (t.params["x"] - 0.3) ** 2 + w / 300,
                   "b": 1 + (t.params["x"] - 0.7) ** 2 + 300 / w})
    s.close()
    v100 = SearchSpace({"x": Float(0, 1), "w": Int(100, 250, step=25)})
    # 300 * share: 0, 18.75, 37.5 (tie: 125), 56.25, 75, 93.75, 112.5 (tie: 200), ...
    want = {100: 100, 125: 125, 150: 125, 175: 150, 200: 175, 225: 200, 250: 200, 275: 225,
            300: 250}
    st = Study(v100, OBJS, storage=tmp_path / "dst", meter="estimate", seed=0,
               transfer_from=[tmp_path / "src"], transfer_map={"w": "relative"})
    src = st.transfer_sources[0]
    assert [r.params["w"] for r in src.records] == [want[w] for w in range(100, 301, 25)]
    assert src.rules["w"] == "relative: same share of the range" and src.dropped == 0
    spec = json.loads((tmp_path / "dst" / "study.json").read_text())
    assert spec["transfer_map"] == {"w": "relative"}
    _run(st, 2)
    st.close()
    # by value (the default): clipped into 100-250
    plain = Study(v100, OBJS, meter="estimate", transfer_from=[tmp_path / "src"])
    assert [r.params["w"] for r in plain.transfer_sources[0].records][-3:] == [250, 250, 250]
    # reopened without transfer_map: the recorded map; another map: an error
    again = Study(v100, OBJS, storage=tmp_path / "dst", meter="estimate", seed=0)
    assert [r.params["w"] for r in again.transfer_sources[0].records] == \
        [r.params["w"] for r in src.records]
    again.close()
    with pytest.raises(TransferSourceError, match="created with transfer_map"):
        Study(v100, OBJS, storage=tmp_path / "dst", meter="estimate", seed=0,
              transfer_map={"w": "value"})
    # bad maps name the rule and the value
    for bad, msg in (({"z": "relative"}, "not a parameter"),
                     ({"w": "share"}, "must be one of"),
                     ("w", "must map parameter names")):
        with pytest.raises(ValueError, match=msg):
            Study(v100, OBJS, meter="estimate", transfer_from=[tmp_path / "src"],
                  transfer_map=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a numeric parameter"):
        Study(SearchSpace({"x": Float(0, 1), "w": Categorical(["lo", "hi"])}), OBJS,
              meter="estimate", transfer_map={"w": "relative"})
    with pytest.raises(ValueError, match="needs transfer sources"):
        Study(v100, OBJS, meter="estimate", transfer_map={"w": "relative"})
    # log scale and numeric choices: the share is taken where the parameter lives
    assert map_relative(10.0, Float(1, 100, log=True), Float(10, 1000, log=True)) == \
        pytest.approx(100.0)
    assert map_relative(8, Categorical([8, 16, 32]), Categorical([16, 64, 128, 256])) == 16
    assert map_relative(32, Categorical([8, 16, 32]), Categorical([16, 64, 128, 256])) == 256
    assert map_relative(7, Categorical([7]), Int(0, 20, step=2)) == 10  # one value: middle


def test_map_relative_ties_steps_single_values_and_bad_values(tmp_path: Path) -> None:
    """Exact ties go to the lower value; a stepped integer's range ends at its last step;
    a huge integer range maps at once; a Fixed source maps to the middle as a one-value
    choice list does; values that are not finite numbers are a ValueError naming them."""
    from ecopt.space import Fixed
    from ecopt.transfer import map_relative

    # 9/14 of 21 is 13.5 and 11/18 of 90 is 55: exact ties, where floats land just above
    assert map_relative(9, Int(0, 14), Int(0, 21)) == 13
    assert map_relative(11, Int(0, 18), Categorical(list(range(0, 91, 10)))) == 50
    ties = [(v, a, b) for a in range(2, 30) for b in range(2, 30) for v in range(a + 1)
            if (2 * v * b) % a == 0 and (2 * v * b // a) % 2 == 1]  # v * b / a ends in .5
    assert ties and all(map_relative(v, Int(0, a), Int(0, b)) == (v * b - a // 2) // a
                        for v, a, b in ties if a % 2 == 0)
    # a stepped Int whose high is between steps: the same as listing its values
    assert map_relative(240, Int(100, 250, step=20), Int(100, 300, step=20)) == \
        map_relative(240, Categorical(list(range(100, 241, 20))), Int(100, 300, step=20)) == 300
    # computed, not searched for among 2**40 values
    assert map_relative(0.5, Float(0, 1), Int(0, 2 ** 40)) == 2 ** 39
    assert map_relative(300, Fixed(300), Int(100, 250, step=25)) == 175
    for bad in (float("nan"), float("inf"), True, "300"):
        with pytest.raises(ValueError, match="finite number, got value="):
            map_relative(bad, Float(100, 300), Int(100, 250))
    with pytest.raises(ValueError, match="numeric parameters"):
        map_relative(1, Float(0, 1), Categorical(["a", "b"]))
    # in a study: a source that held the power limit Fixed maps to the middle, labelled
    sp = SearchSpace({"x": Float(0, 1), "w": Fixed(300)})
    s = Study(sp, OBJS, storage=tmp_path / "fixed", meter="estimate", seed=1, sampler="sobol")
    _run(s, 3)
    s.close()
    v100 = SearchSpace({"x": Float(0, 1), "w": Int(100, 250, step=25)})
    st = Study(v100, OBJS, meter="estimate", transfer_from=[tmp_path / "fixed"],
               transfer_map={"w": "relative"})
    src = st.transfer_sources[0]
    assert [r.params["w"] for r in src.records] == [175, 175, 175]
    assert src.rules["w"].startswith("relative: the source had one value")


def test_a_study_that_fails_to_open_records_no_transfer(tmp_path: Path) -> None:
    """A sampler that cannot use sources is refused before study.json records them: the
    directory then opens as a plain study, or with another map."""
    src = _source(tmp_path / "src")
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    with pytest.raises(ValueError, match="model-based sampler"):
        Study(sp, OBJS, storage=tmp_path / "d", meter="estimate", sampler="random",
              transfer_from=[src], transfer_map={"y": "relative"})
    spec = json.loads((tmp_path / "d" / "study.json").read_text())
    assert "transfer" not in spec and "transfer_map" not in spec
    plain = Study(sp, OBJS, storage=tmp_path / "d", meter="estimate")
    assert plain.transfer_sources == []
    plain.close()
    st = Study(sp, OBJS, storage=tmp_path / "d", meter="estimate", transfer_from=[src])
    assert len(st.transfer_sources) == 1
    st.close()


def test_unrelated_source_is_down_weighted(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    table: dict[float, tuple[float, float]] = {}

    def noise(p: dict) -> dict[str, float]:  # values that mean nothing for the target
        key = round(p["x"], 12)
        table.setdefault(key, tuple(rng.uniform(0, 1, 2)))
        return {"a": table[key][0] * 100, "b": table[key][1] * 100}

    src = _source(tmp_path / "src", n=12, fn=noise)
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    st = Study(sp, OBJS, meter="estimate", seed=0, transfer_from=[src])
    _run(st, 9)
    trusts = [t for r in st.records
              for t in [r.proposal["transfer"]["sources"][0]["trust"]] if t is not None]
    assert trusts and trusts[-1] < 0.3
    last = st.records[-1]
    assert last.proposal["transfer"].get("pooled", []) == []
    # and a related source (same function, other scale) keeps a high trust
    good = _source(tmp_path / "good", n=12)
    st2 = Study(sp, OBJS, meter="estimate", seed=0, transfer_from=[good])
    _run(st2, 6, lambda p: _f(p, 3.0, 2.0))
    assert st2.records[-1].proposal["transfer"]["sources"][0]["trust"] >= 0.5


def test_a_source_that_cannot_predict_itself_is_never_used(tmp_path: Path) -> None:
    """Shuffled values (a source whose trials do not predict each other) get trust 0 from
    the first proposal: the study proposes exactly what a cold study proposes; a real
    source passes the check and shapes the initial design from the first trial."""
    good = _source(tmp_path / "good", n=16)
    junk = _shuffled(good, tmp_path / "junk")
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    kw = {"meter": "estimate", "seed": 4,
          "sampler": ecopt.samplers.QLogNEHVISampler(num_restarts=2, raw_samples=32,
                                                     proposal_share=None)}
    cold = _run(Study(sp, OBJS, **kw), 8, lambda p: _f(p, 3.0, 2.0))
    kw["sampler"] = ecopt.samplers.QLogNEHVISampler(num_restarts=2, raw_samples=32,
                                                    proposal_share=None)
    st = Study(sp, OBJS, transfer_from=[junk], **kw)
    shuffled = _run(st, 8, lambda p: _f(p, 3.0, 2.0))
    assert [t.params for t in shuffled] == [t.params for t in cold]
    first = st.records[0].proposal["transfer"]["sources"][0]
    assert first["trust"] == 0.0 and first["self_trust"] < 0.3
    kw["sampler"] = ecopt.samplers.QLogNEHVISampler(num_restarts=2, raw_samples=32,
                                                    proposal_share=None)
    st2 = Study(sp, OBJS, transfer_from=[good], **kw)
    _run(st2, 1, lambda p: _f(p, 3.0, 2.0))
    note = st2.records[0].proposal["transfer"]["sources"][0]
    assert note["trust"] is None and note["self_trust"] >= 0.5
    assert st2.records[0].proposed_by == "transfer"


def test_a_rejected_source_proposes_as_cold_with_economy_and_batches(tmp_path: Path
                                                                     ) -> None:
    """With the default proposal_share (economy proposals on these cheap trials) and a
    batch ask that crosses the initial design, a study whose only source failed its
    self-check proposes what a cold study proposes, proposal for proposal."""
    good = _source(tmp_path / "good", n=16)
    junk = _shuffled(good, tmp_path / "junk")
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})

    def run(**kw) -> list:
        st = Study(sp, OBJS, meter="estimate", seed=4, **kw,
                   sampler=ecopt.samplers.QLogNEHVISampler(num_restarts=2, raw_samples=32))
        _run(st, 3, lambda p: _f(p, 3.0, 2.0))
        batch = st.ask(4)  # crosses n_init = 5
        for t in batch:
            st.tell(t, _f(t.params, 3.0, 2.0))
        _run(st, 2, lambda p: _f(p, 3.0, 2.0))
        return st.records

    cold, shuffled = run(), run(transfer_from=[junk])
    assert [r.proposed_by for r in cold] == [r.proposed_by for r in shuffled]
    assert [r.params for r in cold] == [r.params for r in shuffled]
    assert [r.proposed_by for r in cold[3:7]] == ["sobol", "sobol", "qlognehvi", "qlognehvi"]
    assert all("economy" in r.proposal for r in shuffled if r.proposed_by == "qlognehvi")
    assert shuffled[-1].proposal["transfer"]["sources"][0]["self_trust"] < 0.3


def test_a_source_point_is_proposed_once_after_the_round_trip(tmp_path: Path) -> None:
    """x = 1.1 in Float(0.2, 2.0) comes back from encode/decode one ulp off; the design
    still runs it once and goes on to the source's other Pareto points."""
    sp = SearchSpace({"x": Float(0.2, 2.0)})
    s = Study(sp, OBJS, storage=tmp_path / "src", meter="estimate", seed=1, sampler="sobol")
    one = lambda p: {"a": (p["x"] - 0.6) ** 2, "b": (p["x"] - 1.6) ** 2}  # noqa: E731
    t = s.ask(params={"x": 1.1})
    s.tell(t, one(t.params))
    _run(s, 3, one)
    s.close()
    front = {round(r.params["x"], 9) for r in ecopt.load_study(tmp_path / "src").best_trials()}
    st = Study(sp, OBJS, meter="estimate", seed=0, transfer_from=[tmp_path / "src"])
    _run(st, len(front), one)
    assert [r.proposed_by for r in st.records] == ["transfer"] * len(front)
    assert {round(r.params["x"], 9) for r in st.records} == front


def test_constrained_transfer_keeps_the_source_in_the_model(tmp_path: Path) -> None:
    """An outcome constraint is modelled beside the multi-task objectives: a source that
    predicts itself well is a task of the model of a constrained study too."""
    good = _source(tmp_path / "good", n=16)
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    st = Study(sp, OBJS, constraints=[ecopt.Constraint("lat", "<=", 80)], meter="estimate",
               seed=0, transfer_from=[good],
               sampler=ecopt.samplers.QLogNEHVISampler(num_restarts=2, raw_samples=32,
                                                       proposal_share=None))
    _run(st, 8, lambda p: {**_f(p, 3.0, 2.0), "lat": 100 * p["x"]})
    model = [r for r in st.records if r.proposed_by == "qlognehvi"]
    assert model and all(r.proposal["gp_state"]["kind"] == "multitask" for r in model)
    assert model[-1].proposal["transfer"]["pooled"] == [st.transfer_sources[0].label]
    assert "fallback" not in model[-1].proposal


def test_a_source_of_a_few_trials_is_not_self_checked(tmp_path: Path) -> None:
    """Below SELF_CHECK_MIN trials a leave-one-out ranking says too little: the source is
    used until the new study's own trials judge it (trust None, no self_trust)."""
    from ecopt.samplers._transfer import SELF_CHECK_MIN

    small = _source(tmp_path / "small", n=SELF_CHECK_MIN - 1)
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    st = Study(sp, OBJS, meter="estimate", seed=0, transfer_from=[small])
    _run(st, 1)
    note = st.records[0].proposal["transfer"]["sources"][0]
    assert note["trust"] is None and "self_trust" not in note
    assert st.records[0].proposed_by == "transfer"


def test_transfer_needs_a_model_sampler_and_new_directory(tmp_path: Path) -> None:
    src = _source(tmp_path / "src")
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    with pytest.raises(ValueError, match="model-based sampler"):
        Study(sp, OBJS, meter="estimate", sampler="random", transfer_from=[src])
    plain = Study(sp, OBJS, storage=tmp_path / "p", meter="estimate", seed=0)
    _run(plain, 2)
    plain.close()
    with pytest.raises(TransferSourceError, match="without transfer sources"):
        Study(sp, OBJS, storage=tmp_path / "p", meter="estimate", transfer_from=[src])


def test_a_source_given_twice_or_mapping_no_trial_is_an_error(tmp_path: Path) -> None:
    src = _source(tmp_path / "src")
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    with pytest.raises(TransferSourceError, match="given twice"):
        Study(sp, OBJS, meter="estimate", transfer_from=[src, tmp_path / "." / "src"])
    empty = Study(sp, OBJS, storage=tmp_path / "empty", meter="estimate", sampler="sobol")
    t = empty.ask()
    empty.tell(t, state="failed")
    empty.close()
    with pytest.raises(TransferSourceError, match="no complete trial that maps"):
        Study(sp, OBJS, storage=tmp_path / "new", meter="estimate",
              transfer_from=[tmp_path / "empty"])
    assert "transfer" not in json.loads((tmp_path / "new" / "study.json").read_text())


def test_pool_threshold_is_kendalls_five_percent_level() -> None:
    from ecopt.samplers._transfer import TRUST_MIN, pool_threshold

    assert pool_threshold(0) == pool_threshold(1) == float("inf")
    assert pool_threshold(3) > 1.0  # three trials never pool a source
    assert pool_threshold(4) == pytest.approx(1.645 * (2 * 13 / (9 * 4 * 3)) ** 0.5)
    assert pool_threshold(5) == pytest.approx(0.6715, abs=1e-4)
    assert pool_threshold(8) == pytest.approx(0.4749, abs=1e-4)
    assert pool_threshold(16) > TRUST_MIN == pool_threshold(17) == pool_threshold(200)
    # exact check at n = 5: rankings with tau >= the bar are 5 of 120 (p = 0.042 <= 0.05)
    from itertools import permutations

    def tau(p: tuple) -> float:
        pairs = [(i, j) for i in range(5) for j in range(i + 1, 5)]
        return sum(1 if p[i] < p[j] else -1 for i, j in pairs) / len(pairs)

    hits = sum(tau(p) >= pool_threshold(5) for p in permutations(range(5)))
    assert hits / 120 <= 0.05
    with pytest.raises(ValueError, match="judged trials >= 0, got -1"):
        pool_threshold(-1)


def test_a_source_enters_the_model_only_once_its_trust_is_significant(tmp_path: Path) -> None:
    """Three target trials ranked right (trust 1.0) happen by chance one time in six per
    objective: a source without a strong self-check shapes the design, but its trials are
    not in the model until enough trials back it (pool_threshold); a source that
    predicts itself well is in the model from the start."""
    from ecopt.record import TrialState, make_record
    from ecopt.samplers._transfer import (SELF_CHECK_MIN, SELF_TRUST_STRONG, TRUST_MIN,
                                          TransferModel, pool_threshold)
    from ecopt.transfer import load_sources

    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    pts = [{"x": x, "y": y} for x, y in [(0.1, 0.1), (0.5, 0.9), (0.9, 0.4), (0.3, 0.6),
                                         (0.7, 0.2), (0.2, 0.8)]]
    recs = [make_record(number=i, state=TrialState.COMPLETE, params=p, values=_f(p, 3.0, 2.0))
            for i, p in enumerate(pts)]
    # unchecked (fewer than SELF_CHECK_MIN trials): significance needed
    small = _source(tmp_path / "small", n=SELF_CHECK_MIN - 1)
    tm = TransferModel(load_sources([small], sp, OBJS), sp, OBJS)
    three = tm.trust(recs[:3])[0]
    assert three["trust"] >= TRUST_MIN and three["poolable"] is False
    assert "self_trust" not in three
    assert three["pool_at"] == pytest.approx(pool_threshold(3), abs=1e-4)
    assert tm.in_model(tm.trust(recs[:3])) == []
    assert tm.design_points(tm.trust(recs[:3]))  # still gives the initial design
    six = tm.trust(recs)
    assert six[0]["trust"] >= pool_threshold(6) and six[0]["poolable"] is True
    assert tm.in_model(six) == [0]
    # checked and strong: the usual bar from the third trial
    big = _source(tmp_path / "big", n=16)
    tm2 = TransferModel(load_sources([big], sp, OBJS), sp, OBJS)
    three2 = tm2.trust(recs[:3])[0]
    assert three2["self_trust"] >= SELF_TRUST_STRONG
    assert three2["pool_at"] == TRUST_MIN and three2["poolable"] is True
    assert tm2.in_model(tm2.trust(recs[:3])) == [0]
    assert tm2.in_model(tm2.trust(recs[:2])) == [0]  # before it is judged


def test_log_columns_and_neg_log() -> None:
    """Minimised positive objectives (negative in maximisation form, in the new study and
    every source) are modelled as -log; any other column is left as it is."""
    from ecopt.samplers._multitask import log_columns, neg_log

    Y = np.array([[-2.0, 0.5, -1.0], [-8.0, -0.5, -3.0]])
    src = np.array([[-4.0, 0.1], [np.nan, 0.2]])  # observes the first two objectives
    assert log_columns(Y, [src], 2) == [True, False]
    assert log_columns(Y, [np.array([[3.0, 0.1]])], 2) == [False, False]
    out = neg_log(Y, [True, False, False])
    assert out[:, 0] == pytest.approx(-np.log([2.0, 8.0]))
    assert np.array_equal(out[:, 1:], Y[:, 1:])
    # monotone: what dominates what is unchanged
    assert (out[0, 0] > out[1, 0]) == (Y[0, 0] > Y[1, 0])


def test_multitask_model_learns_the_new_task_from_a_related_source() -> None:
    """On 4 trials of a new GPU whose energy is the source's times 3 (an offset after the
    log), the multi-task GP ranks and predicts unseen configurations better than a GP of
    the 4 trials alone."""
    import torch

    from ecopt.samplers._multitask import fit_multitask, neg_log
    from ecopt.samplers._transfer import concordance

    rng = np.random.default_rng(0)

    def energy(x: np.ndarray) -> np.ndarray:
        return 1.0 + 10 * (x[:, 0] - 0.3) ** 2 + 5 * (x[:, 1] - 0.6) ** 2

    Xs, Xt, Xq = rng.uniform(size=(25, 2)), rng.uniform(size=(4, 2)), rng.uniform(size=(40, 2))
    Ys = neg_log(-energy(Xs).reshape(-1, 1), [True])
    Yt = neg_log(-3.0 * energy(Xt).reshape(-1, 1), [True])
    T = torch.tensor
    # the task covariance starts from random values: a fixed seed, as each proposal has
    # (at the floor tau is 0.76-0.84 over seeds 0-9, at 0.18.1 0.98-0.99)
    torch.manual_seed(0)
    mt = fit_multitask(T(Xt), T(Yt), [(T(Xs), T(Ys))], ["e"], 1)
    alone = fit_multitask(T(Xt), T(Yt), [], ["e"], 1)
    assert type(mt.models[0]).__name__ == "MultiTaskGP"
    assert type(alone.models[0]).__name__ == "SingleTaskGP"
    truth = -np.log(3.0 * energy(Xq))
    with torch.no_grad():
        pred = {k: m.model.posterior(T(Xq)).mean.squeeze(-1).numpy()
                for k, m in (("mt", mt), ("alone", alone))}
    tau = {k: 2 * concordance(v, truth) - 1 for k, v in pred.items()}
    # BoTorch 0.18: tau 0.99 against 0.66; at the floor, 0.15 (one mean for all tasks), 0.84
    assert tau["mt"] > 0.8 and tau["mt"] > tau["alone"] + 0.1
    assert np.median(np.abs(pred["mt"] - truth)) < np.median(np.abs(pred["alone"] - truth))
    assert set(mt.states["e"]) and all(np.isfinite(v).all() for v in mt.states["e"].values())


def test_a_strong_source_is_a_task_of_the_model_from_the_first_proposal(tmp_path: Path
                                                                        ) -> None:
    """A source that predicts itself well is in the model from the first model-based
    proposal (a multi-task GP, recorded), and one lacking an objective informs the one it
    has."""
    good = _source(tmp_path / "good", n=16)
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    st = Study(sp, OBJS, meter="estimate", seed=0, transfer_from=[good])
    recs = _run(st, 7, lambda p: _f(p, 3.0, 2.0))
    model = [r for r in st.records if r.proposed_by == "qlognehvi"]
    assert model, [r.proposed_by for r in st.records]
    first = model[0].proposal
    assert first["transfer"]["sources"][0]["self_trust"] >= 0.5
    assert first["transfer"]["pooled"] == [st.transfer_sources[0].label]
    assert first["gp_state"]["kind"] == "multitask"
    assert "fast_path_off" not in first
    assert len(recs) == 7
    st.close()
    # a source with objective "a" only: in the model for "a"
    only_a = tmp_path / "only_a"
    s = Study(SearchSpace({"x": Float(0, 1), "y": Float(0, 1)}), [Objective("a", "min")],
              storage=only_a, meter="estimate", seed=1, sampler="sobol")
    for _ in range(16):
        t = s.ask()
        s.tell(t, {"a": _f(t.params)["a"]})
    s.close()
    st2 = Study(sp, OBJS, meter="estimate", seed=0, transfer_from=[only_a])
    _run(st2, 7, lambda p: _f(p, 3.0, 2.0))
    last = st2.records[-1]
    assert last.proposed_by == "qlognehvi"
    assert last.proposal["transfer"]["pooled"] == [st2.transfer_sources[0].label]
    assert last.proposal["gp_state"]["kind"] == "multitask"
    st2.close()


def test_a_source_in_the_model_proposes_from_the_first_new_trial(tmp_path: Path) -> None:
    """A source whose Pareto set is one point: after that point, the next proposal comes
    from the multi-task model (the source's trials beside the one new trial), not from a
    Sobol point, which on the Zeus traces could cost hundreds of times the trial it
    replaced."""
    def one_front(p: dict) -> dict[str, float]:  # both objectives best at the same point
        g = (p["x"] - 0.3) ** 2 + 0.5 * p["y"]
        return {"a": 1.0 + g, "b": 2.0 + 3.0 * g}

    src = _source(tmp_path / "src", n=16, fn=one_front)
    assert len(ecopt.load_study(src).best_trials()) == 1
    sp = SearchSpace({"x": Float(0, 1), "y": Float(0, 1)})
    st = Study(sp, OBJS, meter="estimate", seed=0, transfer_from=[src])
    _run(st, 2, lambda p: {k: 2.0 * v for k, v in one_front(p).items()})
    first, second = st.records
    assert first.proposed_by == "transfer"
    assert second.proposed_by == "qlognehvi", second.proposal
    assert second.proposal["gp_state"]["kind"] == "multitask"
    assert second.proposal["transfer"]["pooled"] == [st.transfer_sources[0].label]
    st.close()


def test_which_sources_enter_the_model() -> None:
    """The rule on each kind of source (self_trust, trust, poolable as trust() records them)."""
    from ecopt.samplers._transfer import TransferModel

    class Src:
        records = [object()]

    cases = [
        ({"self_trust": 0.7, "trust": 0.0, "poolable": False}, True),   # strong: always
        ({"self_trust": 0.4, "trust": None}, True),                      # checked, not judged
        ({"self_trust": 0.4, "trust": 0.35, "poolable": False}, True),   # checked, trusted
        ({"self_trust": 0.4, "trust": 0.2, "poolable": False}, False),   # checked, not trusted
        ({"trust": None}, False),                                        # unchecked, not judged
        ({"trust": 0.9, "poolable": False}, False),                      # unchecked, not signif.
        ({"trust": 0.9, "poolable": True}, True),                        # unchecked, significant
        ({"self_trust": 0.1, "trust": 0.0}, False),                      # failed its self-check
    ]
    tm = TransferModel.__new__(TransferModel)
    tm.sources = [Src() for _ in cases]
    assert tm.in_model([c for c, _ in cases]) == [i for i, (_, ok) in enumerate(cases) if ok]
    empty = type("Empty", (), {"records": []})()
    tm.sources = [empty]
    assert tm.in_model([{"self_trust": 0.9, "trust": None}]) == []


def test_a_categorical_parameter_gets_a_categorical_kernel_in_the_multitask_model(
        tmp_path: Path) -> None:
    """An unordered categorical (a dataframe backend) enters the multi-task GP through a
    categorical kernel, not as a number, and the study proposes from that model."""
    sp = SearchSpace({"x": Float(0, 1), "backend": Categorical(["pandas", "polars", "dask"])})
    cost = {"pandas": 1.0, "polars": 0.5, "dask": 2.0}

    def f(p: dict, scale: float = 1.0) -> dict[str, float]:
        c = cost[p["backend"]]
        return {"a": scale * (c + (p["x"] - 0.3) ** 2),
                "b": scale * (2.5 - c + (p["x"] - 0.7) ** 2)}

    src = Study(sp, OBJS, storage=tmp_path / "src", meter="estimate", seed=1, sampler="sobol")
    _run(src, 16, f)
    src.close()
    st = Study(sp, OBJS, meter="estimate", seed=0, transfer_from=[tmp_path / "src"])
    _run(st, 8, lambda p: f(p, 2.0))
    model = [r for r in st.records if r.proposed_by == "qlognehvi"]
    assert model and all(r.proposal["gp_state"]["kind"] == "multitask" for r in model)
    import torch

    from ecopt.samplers._multitask import fit_multitask

    X = torch.tensor([[0.1, 0.0], [0.5, 1.0], [0.9, 2.0]], dtype=torch.double)
    Y = -torch.tensor([[1.0], [0.6], [2.2]], dtype=torch.double)
    fitted = fit_multitask(X, Y, [(X.clone(), Y.clone() * 0.5)], ["a"], 1, cat_dims=[1])
    kernels = [type(k).__name__ for k in fitted.models[0].covar_module.modules()]
    assert "CategoricalKernel" in kernels and "MultiTaskGP" == type(fitted.models[0]).__name__
