"""Smoke tests of the benchmark scripts: output shape and sanity, never timings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import mobo, overhead
from benchmarks.problems import NOISE_FRACTION, make_problem
from docs.recorded import read_run

from zeus_example import ZEUS_EXAMPLE  # tests/benchmarks/zeus_example.py

_write_trace = ZEUS_EXAMPLE.write


def test_problems_have_published_reference_points_and_seeded_noise() -> None:
    bc = make_problem("branincurrin")
    assert bc.dim == 2 and bc.n_obj == 2 and bc.n_init == 6
    np.testing.assert_allclose(bc.ref_point, [18.0, 6.0])
    assert bc.max_hv == pytest.approx(59.36011874867746)
    vs = make_problem("vehiclesafety-noisy")
    assert vs.n_obj == 3 and vs.budget == 60 and vs.max_hv == pytest.approx(246.81607081187002)
    noisy = make_problem("dtlz2-noisy")
    p = {f"x{i}": 0.3 for i in range(6)}
    y1 = noisy.observe_fn(p, np.random.default_rng(1))
    assert np.array_equal(y1, noisy.observe_fn(p, np.random.default_rng(1)))
    assert not np.allclose(y1, noisy.true_fn(p))
    assert noisy.noise_sd == pytest.approx(NOISE_FRACTION["dtlz2"] * np.ones(2) * 1.9, rel=0.2)
    assert make_problem("dtlz2").observe_fn(p, np.random.default_rng(1)) == pytest.approx(
        noisy.true_fn(p))
    with pytest.raises(ValueError, match="unknown problem"):
        make_problem("dtlz7")


@pytest.mark.slow
def test_quick_mode_writes_sane_tables_and_resumes(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    zeus_dir = _write_trace(tmp_path / "zeus")
    out = tmp_path / "out"
    methods = "ecopt-qlognehvi,ecopt-sobol,optuna-tpe,optuna-nsga2-small"
    argv = ["--quick", "--problems", "branincurrin,zeus", "--methods", methods, "--seeds", "2",
            "--budget", "7", "--zeus-dir", str(zeus_dir), "--out", str(out)]
    assert mobo.main(argv) == 0
    runs = [json.loads(line) for line in (out / "runs-main.jsonl").read_text().splitlines()]
    assert len(runs) == 2 * 4 * 2
    for r in runs:
        hv = np.asarray(r["hv"])
        assert hv.shape == (7,) and np.all(np.diff(hv) >= -1e-12)
        assert np.all(hv >= 0) and np.all(hv <= r["max_hv"] * (1 + 1e-9))
        assert np.all(np.isfinite(r["log_gap"]))
        assert len(r["params"]) == 7
    qn = [r for r in runs if r["method"] == "ecopt-qlognehvi"]
    # ecopt's own design, min(2 (d + 1), 5) = 5 points (the centre first), then the model.
    assert all(len(r["ask_s"]) == 2 for r in qn)
    # Same seed: Optuna TPE starts from the shared Sobol design; ecopt's default starts at the
    # centre of the space instead of its first point, then follows the same Sobol sequence
    # (skipping, in this discrete space, a point that is the centre again).
    a = next(r for r in runs if r["method"] == "ecopt-qlognehvi" and r["problem"] == "zeus")
    b = next(r for r in runs if r["method"] == "optuna-tpe" and r["problem"] == "zeus"
             and r["seed"] == a["seed"])
    assert a["params"][1] == b["params"][1] and a["params"][0] != b["params"][0]
    keys = [tuple(sorted(p.items())) for p in a["params"][:6]]
    assert len(set(keys)) == 6
    md = (out / "report.md").read_text()
    for prob in ("branincurrin", "zeus"):
        section = md.split(f"### {prob}")[1].split("###")[0]
        rows = [ln for ln in section.splitlines() if ln.startswith("| ")]
        assert rows[0].startswith("| method | seeds | n=6 | n=7 | final HV | sd | worst HV | "
                                  "worst seed | collapses | p better | p worse | ask s |")
        assert [ln.split(" | ")[0][2:] for ln in rows[1:]] == [
            m for m in mobo.METHODS if m in methods.split(",")]
    summary = json.loads((out / "summary.json").read_text())
    for s in summary.values():
        for m, row in s["rows"].items():
            p = row["p_ecopt_better"]
            assert (p is None) == (m == "ecopt-qlognehvi") and (p is None or 0 <= p <= 1)
    assert "### Targets" in md and (out / "zeus.png").is_file()
    # A second call finds every run done and only rebuilds the report.
    assert mobo.main(argv) == 0
    assert len((out / "runs-main.jsonl").read_text().splitlines()) == len(runs)
    # A part of the runs, recorded in the docs/results format (what docs.tables reads).
    monkeypatch.chdir(tmp_path)
    assert mobo.main(["--report-only", "--out", str(out), "--problems", "zeus", "--seeds", "1",
                      "--methods", "ecopt-qlognehvi,optuna-tpe", "--record", "t",
                      "--note", "a caveat"]) == 0
    (run_dir,) = (tmp_path / "docs" / "results" / "mobo").iterdir()
    assert run_dir.name.endswith("-t")
    rec = read_run(run_dir)
    assert rec.script == "benchmarks/mobo.py" and rec.energy is None and "a caveat" in rec.notes
    (table,) = rec.tables.values()
    assert [r[0] for r in table.rows] == ["ecopt-qlognehvi", "optuna-tpe"]
    assert all(r[1] == 1 for r in table.rows)  # seed 0 only
    assert rec.facts["code"]["ecopt-qlognehvi"] == [runs[0]["git_commit"]]
    # The record keeps the runs it shows; copied into a fresh --out (no runs of its own),
    # they rebuild the same table.
    kept = run_dir / mobo.RECORDED_RUNS
    assert sorted((r["method"], r["seed"]) for r in mobo._load_runs(run_dir)) == [
        ("ecopt-qlognehvi", 0), ("optuna-tpe", 0)]
    again = tmp_path / "again"
    again.mkdir()
    (again / "runs-earlier.jsonl.gz").write_bytes(kept.read_bytes())
    assert mobo.main(["--report-only", "--out", str(again), "--problems", "zeus", "--no-plot",
                      "--seeds", "1", "--methods", "ecopt-qlognehvi,optuna-tpe"]) == 0
    assert json.loads((again / "summary.json").read_text()) == json.loads(
        (out / "summary.json").read_text())
    # Written again from the same runs, the file is byte-for-byte the same.
    assert mobo.write_runs(tmp_path / "x.gz", mobo._load_runs(run_dir)).read_bytes() == \
        kept.read_bytes()


@pytest.mark.slow
def test_overhead_times_every_method_on_one_history() -> None:
    import ecopt.samplers.qnehvi as qn

    res = overhead.measure(n=8, M=2, q=1, reps=1, d=3,
                           sampler_files={"ecopt": None, "copy": qn.__file__})
    assert set(res) == {"ecopt", "copy", "optuna-gp"}
    for label, r in res.items():
        assert len(r["raw_total_s"]) == 1 and r["total_s"]["median"] > 0
        assert r["cpu_s"]["median"] > 0
    assert res["ecopt"]["fit_cpu_s"]["median"] > 0 and "fit_cpu_s" not in res["optuna-gp"]
    rows = [{"method": "optuna-gp" if k == "optuna-gp" else "ecopt", "label": k, "M": 2, "q": 1,
             "n": 8, **r, "peak_rss_mib": 100.0, "torch_threads": 1} for k, r in res.items()]
    table = [ln for ln in overhead.report_markdown(rows, "cmd", {"a": "1"}).splitlines()
             if ln.startswith("|")]
    assert len(table) == 5  # header, rule, three rows
    assert all(("HOLDS" in ln or "MISSED" in ln) for ln in table[2:4])
    assert table[4].split(" | ")[0] == "| optuna-gp"


def test_qnehvi_method_runs_the_papers_acquisition() -> None:
    """``ecopt-qnehvi`` (the ECOpt paper's non-log qNEHVI) is a known method and proposes."""
    from ecopt.samplers import QNEHVISampler

    from ecopt.samplers.qnehvi import INIT_TRIALS

    assert mobo.known_method("ecopt-qnehvi")
    problem = make_problem("branincurrin")
    budget = INIT_TRIALS + 2  # the sampler's own design (5 of BraninCurrin's 2 (d + 1) = 6)
    params, ask_s = mobo._run_ecopt(problem, "ecopt-qnehvi", 0, budget)
    assert len(params) == budget and len({tuple(sorted(p.items())) for p in params}) == budget
    assert QNEHVISampler.name == "qnehvi"
    assert len(ask_s) == 2  # the model's asks are timed, as qLogNEHVI's are


@pytest.mark.parametrize("method, share, n_init, design", [
    ("ecopt-qlognehvi", None, None, 5),  # the sampler's own design: min(2 (d + 1), 5)
    ("ecopt-qlognehvi-nosab", None, None, 5),
    ("ecopt-qlognehvi-init5", None, 5, 5),
    ("ecopt-qlognehvi-economy", 0.25, None, 5),
    ("ecopt-qlognehvi-design2d", None, 6, 6),  # the shared design's 2 (d + 1)
    ("ecopt-qlognehvi-nosab-design2d", None, 6, 6),
    ("ecopt-qlognehvi-design2d-economy", 0.25, 6, 6)])
def test_ecopt_rows_run_full_proposals_unless_named_economy(
        method: str, share: float | None, n_init: int | None, design: int,
        monkeypatch) -> None:
    """A test function costs nothing: the default economy rule would economise every
    proposal after the first, so the rows measure full proposals; ``-economy`` the default.
    Every row starts from the sampler's own design, ``-design2d`` from ``2 (d + 1)`` trials."""
    from ecopt.samplers import qnehvi

    seen: list[tuple[float | None, int | None]] = []
    init = qnehvi.QLogNEHVISampler.__init__

    def spy(self, *a, **k):  # type: ignore[no-untyped-def]
        init(self, *a, **k)
        seen.append((self.proposal_share, self.n_init))

    monkeypatch.setattr(qnehvi.QLogNEHVISampler, "__init__", spy)
    problem = make_problem("branincurrin")
    params, ask_s = mobo._run_ecopt(problem, method, 0, problem.n_init + 3)
    assert mobo.known_method(method) and len(params) == problem.n_init + 3
    assert seen == [(share, n_init)]
    assert len(ask_s) == problem.n_init + 3 - design  # the Sobol design, then the model's


def test_design2d_is_only_a_suffix_of_qlognehvi_rows() -> None:
    assert not mobo.known_method("ecopt-sobol-design2d")
    assert not mobo.known_method("ecopt-qlognehvi-nonsense-design2d")
    assert mobo.known_method("ecopt-qlognehvi-r20-raw1024-mc64-design2d")
    # Rows that set their own design would ignore the suffix: their names are refused.
    assert not mobo.known_method("ecopt-qlognehvi-init5-design2d")
    assert not mobo.known_method("ecopt-qlognehvi-axdesign-design2d-economy")


@pytest.mark.parametrize("method, want", [
    ("ecopt-qlognehvi-dimscaled-center", {"lengthscale_prior": "dim-scaled",
                                          "init_center": True, "n_init": None}),
    ("ecopt-qlognehvi-axdesign", {"lengthscale_prior": "dim-scaled", "init_center": True,
                                  "n_init": 5, "num_restarts": 10, "raw_samples": 256}),
    ("ecopt-qlognehvi-axdesign-raw1024", {"lengthscale_prior": "dim-scaled",
                                          "init_center": True, "n_init": 5, "num_restarts": 10,
                                          "raw_samples": 1024, "mc_samples": None}),
    ("ecopt-qlognehvi-scipyftol", {"cold_ftol": None, "warm_ftol": 1e-6, "n_init": None,
                                   "raw_samples": 256, "lengthscale_prior": "auto"}),
    ("ecopt-qlognehvi-ftol1e-6", {"cold_ftol": 1e-6, "warm_ftol": 1e-6, "n_init": None,
                                  "raw_samples": 256, "lengthscale_prior": "auto"}),
    ("ecopt-qlognehvi", {"cold_ftol": "auto", "n_init": None, "num_restarts": 10,
                         "raw_samples": 256, "lengthscale_prior": "auto", "init_center": True}),
    ("ecopt-qlognehvi-design2d", {"cold_ftol": "auto", "n_init": 6, "num_restarts": 10,
                                  "lengthscale_prior": "auto", "init_center": True}),
    ("ecopt-qlognehvi-axlike", {"lengthscale_prior": "dim-scaled", "init_center": True,
                                "n_init": 5, "num_restarts": 20, "raw_samples": 1024,
                                "mc_samples": 128})])
def test_the_ax_setting_rows_build_the_sampler_they_name(method: str, want: dict,
                                                         monkeypatch) -> None:
    """The ablation rows that take the settings of Ax's default strategy (or of BoTorch's
    own fits) one part at a time build the sampler they name."""
    from ecopt.samplers import qnehvi

    class Built(Exception):
        pass

    seen: list = []

    def spy(self, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(self)
        raise Built

    monkeypatch.setattr(qnehvi.QLogNEHVISampler, "propose", spy)
    problem = make_problem("branincurrin")
    with pytest.raises(Built):  # the first ask shows the sampler the row built
        mobo._run_ecopt(problem, method, 0, 1)
    assert mobo.known_method(method) and len(seen) == 1
    assert {k: getattr(seen[0], k) for k in want} == want
    assert seen[0].proposal_share is None


def _fake_run(method: str, seed: int, final_hv: float, budget: int = 8) -> dict:
    """A run record as ``run_one`` writes it, with a given final hypervolume (max HV 10)."""
    hv = list(np.linspace(0.5 * final_hv, final_hv, budget))
    return {"problem": "p", "method": method, "seed": seed, "budget": budget, "n_init": 4,
            "max_hv": 10.0, "hv": hv, "log_gap": [float(np.log10(10.0 - h)) for h in hv],
            "ask_s": [0.1 * (seed + 1)]}


def test_summary_compares_qnehvi_with_qlognehvi_one_sided_with_intervals() -> None:
    """The qLogNEHVI / qNEHVI pair gets both one-sided Mann-Whitney p values and a final-HV
    interval (mean +- 2 SE over seeds) in the report table."""
    from scipy.stats import mannwhitneyu

    log_hv = [9.0, 9.2, 9.1, 9.3, 9.4]
    q_hv = [7.0, 7.5, 8.0, 7.2, 9.15]
    runs = ([_fake_run("ecopt-qlognehvi", s, h) for s, h in enumerate(log_hv)]
            + [_fake_run("ecopt-qnehvi", s, h) for s, h in enumerate(q_hv)])
    s = mobo.summarise(runs)["p"]
    row = s["rows"]["ecopt-qnehvi"]
    assert row["p_ecopt_better"] == pytest.approx(
        mannwhitneyu(log_hv, q_hv, alternative="greater").pvalue)
    assert row["p_ecopt_better"] < 0.05 < row["p_ecopt_worse"]
    assert s["rows"]["ecopt-qlognehvi"]["p_ecopt_better"] is None
    cols, rows = mobo.problem_table(s)
    cell = rows[1][cols.index("final HV")]
    se = float(np.std(q_hv, ddof=1)) / np.sqrt(5)
    assert cell["value"] == pytest.approx(np.mean(q_hv))
    assert (cell["low"], cell["high"]) == pytest.approx((np.mean(q_hv) - 2 * se,
                                                         np.mean(q_hv) + 2 * se))
    assert rows[1][cols.index("n=8")]["high"] > rows[1][cols.index("n=8")]["value"]
    # Swapped roles: qNEHVI as the reference flips the one-sided p values.
    flipped = mobo.summarise(runs, reference="ecopt-qnehvi")["p"]["rows"]["ecopt-qlognehvi"]
    assert flipped["p_ecopt_worse"] == pytest.approx(row["p_ecopt_better"])


def test_report_only_rebuilds_the_pair_with_the_runs_threads(tmp_path: Path) -> None:
    """``--report-only`` states the torch threads given (as the runs used them) and shows
    the final HV of each method with its interval."""
    import torch

    runs = ([_fake_run("ecopt-qlognehvi", s, 9.0 + 0.1 * s) for s in range(3)]
            + [_fake_run("ecopt-qnehvi", s, 8.0 + 0.1 * s) for s in range(3)])
    (tmp_path / "runs-main.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert mobo.main(["--report-only", "--out", str(tmp_path), "--no-plot",
                          "--methods", "ecopt-qlognehvi,ecopt-qnehvi", "--threads", "1"]) == 0
    finally:
        torch.set_num_threads(before)
    md = (tmp_path / "report.md").read_text()
    assert "torch_threads 1" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| ecopt-qnehvi |"))
    assert "| 8.1 [7.985, 8.215] |" in row  # final HV: mean 8.1 +- 2 x 0.1 / sqrt(3)


def test_target_lines_use_the_one_rule() -> None:
    """A p-value above 0.05 is 'not shown', never a pass (the 2026-12-03 runs said 'HOLDS')."""
    from benchmarks.mobo import targets_of_tables
    from docs.recorded import Table

    t = Table(["method", "p better", "p worse"],
              [["ecopt-qlognehvi", None, None], ["ecopt-before", 0.339, 0.688],
               ["ecopt-random", 0.001, 0.999], ["optuna-gp", 0.99, 0.0001]])
    lines = targets_of_tables({"dtlz2": t})
    assert lines == [
        "- dtlz2: qLogNEHVI's final hypervolume above ecopt-random's: holds "
        "(p better = 0.001, p worse = 0.999)",
        "- dtlz2: qLogNEHVI's final hypervolume above optuna-gp's: does not hold "
        "(p better = 0.99, p worse = 0.0001)",
        "- dtlz2: qLogNEHVI's final hypervolume above ecopt-before's: not shown "
        "(p better = 0.339, p worse = 0.688)"]


def test_the_mixed_problem_keeps_branincurrins_front_through_two_categories() -> None:
    mixed, bc = make_problem("mixedbc"), make_problem("branincurrin")
    assert mixed.dim == 4 and mixed.max_hv == bc.max_hv
    assert list(mixed.ref_point) == list(bc.ref_point)
    x = {"x0": 0.3, "x1": 0.4}
    on = mixed.true_fn({**x, "kind": "a", "n": 1})
    assert list(on) == pytest.approx(list(bc.true_fn(x)))
    assert list(mixed.true_fn({"x0": 0.7, "x1": 0.4, "kind": "b", "n": 1})) == pytest.approx(
        list(on))  # b mirrors x0: the same values, so the same front
    for off in ({**x, "kind": "c", "n": 1}, {**x, "kind": "a", "n": 3}):
        assert (mixed.true_fn(off) > on).all()  # dominated
    assert (make_problem("mixedbc-noisy").noise_sd > 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["ecopt-qlognehvi", "botorch-plain", "optuna-tpe"])
def test_every_peer_searches_the_mixed_problem(method: str) -> None:
    problem = make_problem("mixedbc")
    budget = problem.n_init + 2
    r = mobo.run_one(problem, method, 0, budget)
    assert len(r["hv"]) == budget and 0 <= r["hv"][-1] <= problem.max_hv
    for p in r["params"]:
        assert p["kind"] in ("a", "b", "c") and p["n"] in (1, 2, 3, 4)
        assert 0 <= p["x0"] <= 1 and 0 <= p["x1"] <= 1
