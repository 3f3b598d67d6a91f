"""Figures (ecopt.plot) drawn from real small studies."""

from __future__ import annotations

import io

import pytest

import ecopt
import ecopt.plot
from ecopt.report import build_report

matplotlib = pytest.importorskip("matplotlib")
from PIL import Image  # noqa: E402  (a matplotlib dependency)

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})


def objective(trial):
    if trial["x"] > 0.8:
        raise RuntimeError("diverged")
    with trial.phase("train"):
        sum(range(3000 + int(3000 * trial["x"])))
    trial.repeat_in_phase("inference", lambda: sum(range(1000 + int(4000 * trial["y"]))),
                          samples_per_call=100)
    return {"accuracy": trial["x"] - 0.3 * trial["y"] ** 2,
            "latency_ms": 5 + 40 * trial["y"],
            "samples_per_joule": trial.samples_per_joule("inference")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("plot")
    out = {}
    for name, objs, cons in [
        ("two", [ecopt.Objective("accuracy", "max", threshold=0.0),
                 ecopt.Objective("samples_per_joule", "max")],
         [ecopt.Constraint("latency_ms", "<=", 35.0)]),
        ("three", [ecopt.Objective("accuracy", "max"), ecopt.Objective("latency_ms", "min"),
                   ecopt.Objective("samples_per_joule", "max")], []),
    ]:
        with ecopt.Study(SPACE, objs, cons, storage=root / name, sampler="random",
                         meter="estimate", seed=2) as s:
            s.optimize(objective, n_trials=12, show_progress=False)
        out[name] = root / name
    return out


def _png_size(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=ecopt.plot.DPI)
    buf.seek(0)
    return Image.open(buf).size


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_two_objective_front_is_one_labelled_panel(runs):
    data = build_report(runs["two"])
    fig = ecopt.plot.pareto(runs["two"])
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.get_xlabel() == "accuracy [max]"
    assert ax.get_ylabel() == "samples_per_joule [max] (estimated)"
    labels = _texts(ax)
    for n in data.front:
        assert f"{n}" in labels or f"{n}*" in labels
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("Pareto front") for t in legend)
    assert any(t.startswith("failed, no values") for t in legend)
    assert any(t.startswith("reference point") for t in legend)
    assert any(t.startswith("threshold accuracy") for t in legend)
    if data.counts["violates_constraints"]:
        assert any(t.startswith("breaks a constraint") for t in legend)
    assert "ESTIMATED" in ax.get_title()
    assert _png_size(fig) == (700, 500)


def test_three_objectives_draw_pairwise_panels(runs):
    fig = ecopt.plot.pareto(runs["three"])
    assert len(fig.axes) == 3
    pairs = {(a.get_xlabel().split()[0], a.get_ylabel().split()[0]) for a in fig.axes}
    assert pairs == {("accuracy", "latency_ms"), ("accuracy", "samples_per_joule"),
                     ("latency_ms", "samples_per_joule")}
    assert _png_size(fig) == (1500, 480)


def test_custom_axes_and_unknown_metric(runs):
    fig = ecopt.plot.pareto(runs["two"], x="energy_j", y="accuracy")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "energy per trial (J) (estimated)"
    # Failed trials have energy but no accuracy: still listed, never drawn at made-up values.
    with pytest.raises(ValueError, match=r"unknown metric 'nope'.*choose one of \['accuracy'"):
        ecopt.plot.pareto(runs["two"], x="nope")


def test_hypervolume_and_phase_figures(runs):
    data = build_report(runs["two"])
    fig = ecopt.plot.hypervolume(data)
    assert len(fig.axes) == 2
    assert fig.axes[1].get_xlabel() == "cumulative energy of the search (J) (estimated)"
    line = fig.axes[0].lines[0]
    assert list(line.get_ydata()) == [p.hypervolume for p in data.hv_series]
    assert _png_size(fig) == (1100, 420)
    fig = ecopt.plot.phase_energy(data)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == [f"#{n}" for n in data.front]
    assert fig.axes[0].get_ylabel() == "energy (J) (estimated)"
    # Bars stack to each trial's total energy.
    heights = {}
    for patch in fig.axes[0].patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        heights[x] = heights.get(x, 0.0) + patch.get_height()
    for i, n in enumerate(data.front):
        assert heights[i] == pytest.approx(data.record(n).energy_j)


def test_compare_figure(runs, tmp_path):
    other = tmp_path / "other"
    with ecopt.Study(SPACE, [ecopt.Objective("accuracy", "max", threshold=0.0),
                             ecopt.Objective("samples_per_joule", "max")],
                     [ecopt.Constraint("latency_ms", "<=", 35.0)], storage=other,
                     sampler="random", meter="estimate", seed=5) as s:
        s.optimize(objective, n_trials=6, show_progress=False)
    fig = ecopt.plot.compare([runs["two"], other])
    assert len(fig.axes) == 2
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("two (HV") for t in legend)
    assert any(t.startswith("other (HV") for t in legend)


def test_empty_study_and_dollar_signs_do_not_break_drawing(tmp_path):
    with ecopt.Study(SPACE, [ecopt.Objective("a$b$", "max"), ecopt.Objective("c", "min")],
                     storage=tmp_path / "e", sampler="random", meter="estimate", name="$x^$"):
        pass
    fig = ecopt.plot.pareto(tmp_path / "e")
    assert "no finished trials" in " ".join(_texts(fig.axes[0]))
    _png_size(fig)
    _png_size(ecopt.plot.hypervolume(tmp_path / "e"))


def test_live_study_object_is_accepted(runs):
    study = ecopt.load_study(runs["two"])
    fig = ecopt.plot.pareto(study)
    assert len(fig.axes) == 1


def test_in_memory_study(tmp_path):
    from ecopt.report.html import write_report

    with ecopt.Study(SPACE, [ecopt.Objective("accuracy", "max"),
                             ecopt.Objective("samples_per_joule", "max")],
                     [ecopt.Constraint("latency_ms", "<=", 100.0)],
                     sampler="random", meter="estimate", seed=1) as s:
        s.optimize(objective, n_trials=5, show_progress=False)
        running = s.ask()
        data = build_report(s)
        assert data.path == "" and data.unfinished == (running.number,) and data.front
        assert len(ecopt.plot.pareto(s).axes) == 1
        with pytest.raises(ValueError, match="in-memory study has no directory"):
            write_report(s)
        out, _ = write_report(s, tmp_path / "mem.html")
        assert "in-memory study" in out.read_text()
        s.tell(running, RuntimeError("stop"))
