"""Costs that do not grow with the log: ask()+tell(), load_study and the dashboard at 1k-50k trials.

For each size ``n``, a study directory with ``n`` finished trials is written
directly (two objectives, ``acc`` max and ``energy_j`` min; 45% complete with
an 8-step learning curve, 50% pruned after 1-4 steps, as a pruned search
leaves them, 5% failed; each trial's ``train`` phase carries estimate-meter
provenance, so its joules are ESTIMATED, and none is measured here), then:

1. ``load_study(dir)``: CPU seconds to read the whole log (linear by nature:
   the per-trial microseconds are the figure that should stay flat);
2. ``ask()`` + ``tell()``: the study re-opened for writing (``sampler="random"``,
   so the sampler's own cost is out; ``meter="wallclock"``), 3 trials to warm
   up, then ``--rounds`` trials asked and told one at a time; CPU microseconds
   per trial (wall too: each ``tell()`` fsyncs its line);
3. the dashboard: the page holds the state at ``n`` trials, one more trial is
   told, and the page refreshes: bytes the server sends for that change (as
   JSON, the way it is served), and the server's CPU seconds to make it.

The same script measures another checkout (the ``before`` rows: run it from
that checkout's root, with this file copied into its ``benchmarks/``), and
writes one results file per label into ``--out``; ``--report-only`` makes the
table from every label there.

Usage::

    flock /work/bench.lock nice -n 5 python -m benchmarks.scaling --label after --out runs/scaling
    python -m benchmarks.scaling --report-only --out runs/scaling --record   # docs/results/scaling/<date>
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/scaling.py``: docs.recorded from the root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

import ecopt
from ecopt.meters.base import ComponentEnergy, Measurement
from ecopt.storage import dumps
from ecopt.trial import ErrorInfo, Intermediate, PhaseRecord, TrialRecord, TrialState

SPACE = {f"x{i}": (0.0, 1.0) for i in range(4)}
COLUMNS = ["code", "trials in the log", "ask+tell CPU µs per trial", "ask+tell wall µs per trial",
           "load_study CPU s", "load_study CPU µs per trial", "dashboard KB per change",
           "dashboard server CPU s per change"]


def _space() -> ecopt.SearchSpace:
    return ecopt.SearchSpace({k: ecopt.Float(lo, hi) for k, (lo, hi) in SPACE.items()})


def _objectives() -> list[ecopt.Objective]:
    return [ecopt.Objective("acc", "max"), ecopt.Objective("energy_j", "min")]


def _record(k: int, rng: np.random.Generator) -> TrialRecord:
    x = rng.random(4)
    acc_final = float(0.5 + 0.45 * x[0] - 0.1 * (x[1] - 0.5) ** 2)
    joules_per_step = float(1.0 + 4.0 * x[0] * x[2])
    u = rng.random()
    state = TrialState.FAILED if u < 0.05 else TrialState.PRUNED if u < 0.55 else \
        TrialState.COMPLETE
    steps = 0 if state is TrialState.FAILED else int(rng.integers(1, 5)) \
        if state is TrialState.PRUNED else 8
    curve = tuple(Intermediate(s, {"acc": acc_final * (1 - 0.5 / s)}, joules_per_step * s,
                               0.5 * s, False) for s in range(1, steps + 1))
    energy = joules_per_step * max(steps, 1)
    meas = Measurement(0.5 * max(steps, 1), {"cpu": ComponentEnergy(
        energy, "estimate-cpu-time", False, "synthetic")}, "estimate")
    values = {"acc": acc_final, "energy_j": energy} if state is TrialState.COMPLETE else \
        {"acc": curve[-1].values["acc"]} if state is TrialState.PRUNED else {}
    return TrialRecord(
        number=k, state=state, params={f"x{i}": float(v) for i, v in enumerate(x)},
        values=values, feasible=state is TrialState.COMPLETE,
        phases={"train": PhaseRecord("train", meas, max(steps, 1), 100 * max(steps, 1))},
        started_at="2026-12-01T00:00:00+00:00", duration_s=0.5 * max(steps, 1),
        proposed_by="random",
        proposal={"search": {"energy_j": 0.01, "duration_s": 0.001, "measured": False,
                             "source": "cpu=estimate-cpu-time", "meter": "estimate",
                             "batch": 1}},
        error=ErrorInfo("RuntimeError", "diverged") if state is TrialState.FAILED else
        ErrorInfo("TrialPruned", "stopped at its rung") if state is TrialState.PRUNED else None,
        host="bench", worker="pid:1", intermediate=curve)


def make_study(path: Path, n: int, seed: int = 0) -> None:
    """A study directory holding ``n`` finished trials (written in one go, not fsynced each)."""
    st = ecopt.Study(_space(), _objectives(), storage=path, sampler="random",
                     meter="wallclock", seed=seed)
    st.close()
    rng = np.random.default_rng(seed)
    with open(path / "trials.jsonl", "w", encoding="utf-8") as f:
        for k in range(n):
            f.write(dumps(_record(k, rng).to_dict()) + "\n")


def _values(t: ecopt.Trial) -> dict[str, float]:
    return {"acc": 0.5 + 0.4 * float(t.params["x0"]), "energy_j": 1.0 + float(t.params["x2"])}


def _json_bytes(reply: dict[str, Any]) -> int:
    # As the server sends it (Starlette's JSONResponse).
    return len(json.dumps(reply, ensure_ascii=False, allow_nan=False, indent=None,
                          separators=(",", ":")).encode("utf-8"))


def measure(n: int, rounds: int, tmp: Path) -> dict[str, Any]:
    """One size: load_study, ask+tell per trial, dashboard bytes and CPU per change."""
    path = tmp / f"study-{n}"
    make_study(path, n)
    c0, t0 = time.process_time(), time.perf_counter()
    loaded = ecopt.load_study(path)
    load_cpu, load_wall = time.process_time() - c0, time.perf_counter() - t0
    assert len(loaded.records) == n
    del loaded
    study = ecopt.Study(_space(), _objectives(), storage=path, sampler="random",
                        meter="wallclock", seed=1)
    for _ in range(3):  # warm up (imports, first proposal)
        t = study.ask()
        study.tell(t, _values(t))
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        t = study.ask()
        study.tell(t, _values(t))
    cpu_us = (time.process_time() - c0) / rounds * 1e6
    wall_us = (time.perf_counter() - t0) / rounds * 1e6
    from ecopt.report import dashboard as D

    feed = getattr(D, "DashboardFeed", None)
    page = feed(path) if feed is not None else None
    held = page.changes(None) if page is not None else D.dashboard_state(path)
    t = study.ask()
    study.tell(t, _values(t))
    time.sleep(0.01)  # a new modification time for the log
    c0 = time.process_time()
    reply = page.changes(held["version"]) if page is not None else D.dashboard_state(path)
    dash_cpu = time.process_time() - c0
    assert reply["n_trials"] == n + 3 + rounds + 1 and "unchanged" not in reply
    study.close()
    return {"n": n, "rounds": rounds, "ask_tell_cpu_us": cpu_us, "ask_tell_wall_us": wall_us,
            "load_cpu_s": load_cpu, "load_wall_s": load_wall,
            "dashboard_bytes": _json_bytes(reply), "dashboard_delta": "changes" in reply,
            "dashboard_cpu_s": dash_cpu}


def run(sizes: list[int], rounds: int, label: str, out: Path, note: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ecopt-scaling-") as tmp:
        for n in sizes:
            row = measure(n, rounds, Path(tmp))
            rows.append(row)
            print(f"{label} n={n}: ask+tell {row['ask_tell_cpu_us']:.0f} CPU µs/trial, "
                  f"load_study {row['load_cpu_s']:.2f} CPU s, dashboard "
                  f"{row['dashboard_bytes'] / 1000:.1f} KB/change "
                  f"({row['dashboard_cpu_s']:.2f} CPU s)", flush=True)
    result = {"label": label, "rows": rows, "ecopt": str(Path(ecopt.__file__).parent),
              "ecopt_version": ecopt.__version__, "python": platform.python_version(),
              "load_avg_before": list(load0), "load_avg_after": list(os.getloadavg()),
              "note": note}
    path = out / f"scaling-{label}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return path


def report(out: Path, record: str | None, notes: list[str]) -> int:
    from docs import recorded

    results = [json.loads(p.read_text()) for p in sorted(out.glob("scaling-*.json"))]
    results.sort(key=lambda r: (r["label"] != "before", r["label"]))
    rows = []
    for res in results:
        for r in res["rows"]:
            rows.append([res["label"], r["n"], round(r["ask_tell_cpu_us"]),
                         round(r["ask_tell_wall_us"]), round(r["load_cpu_s"], 2),
                         round(r["load_cpu_s"] / r["n"] * 1e6, 1),
                         round(r["dashboard_bytes"] / 1000, 1), round(r["dashboard_cpu_s"], 2)])
    table = recorded.Table(COLUMNS, rows)
    print(recorded.render_table(table))
    if record is None:
        return 0
    where = recorded.results_dir("scaling", tag=record or None)
    loads = "; ".join(f"{r['label']}: load average {r['load_avg_before'][0]:.2f} before, "
                      f"{r['load_avg_after'][0]:.2f} after" for r in results)
    recorded.write_run(
        where, script="benchmarks/scaling.py",
        command=recorded.command_line("benchmarks/scaling.py",
                                      ["--report-only", "--out", str(out), "--record",
                                       *([record] if record else [])]),
        tables={"per_trial": table}, energy=None,
        title="Costs that do not grow with the log (ask+tell, load_study, dashboard)",
        notes=[("ask+tell: sampler 'random' (its own cost is out), meter 'wallclock'; mean over "
                "the measured rounds after 3 warm-up trials; CPU µs are this process's, wall "
                "µs include each tell()'s fsync. Logs: 45% complete (8-step curves), 50% "
                "pruned (1-4 steps), 5% failed; the trials' joules are synthetic "
                "estimate-meter records (no energy is measured here)"),
               ("dashboard: bytes the server sends (JSON) when the page, holding the state "
                "of the study, refreshes after one more trial: the whole state before "
                "(code 'before'), the changes after; server CPU s: making that reply"),
               *(f"{r['label']}: {r['note']}" for r in results if r.get("note")),
               loads, *notes],
        facts={"labels": [r["label"] for r in results],
               "rounds": sorted({row["rounds"] for r in results for row in r["rows"]}),
               "load_avg": {r["label"]: [r["load_avg_before"], r["load_avg_after"]]
                            for r in results}})
    print(f"recorded in {where}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument("--rounds", type=int, default=50, help="ask+tell trials timed per size")
    ap.add_argument("--label", default="after", help="the code measured (a row label)")
    ap.add_argument("--out", type=Path, default=Path("runs/scaling"))
    ap.add_argument("--note", action="append", default=[],
                    help="a note kept with the label (e.g. which commit ran); with "
                         "--report-only, a note of the recorded run")
    ap.add_argument("--report-only", action="store_true",
                    help="make the table from the results in --out (and record it)")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="with --report-only: write docs/results/scaling/<date>[-TAG]")
    args = ap.parse_args(argv)
    if args.report_only:
        return report(args.out, args.record, args.note)
    if any(n < 1 for n in args.sizes) or args.rounds < 1:
        ap.error("sizes and rounds must be >= 1")
    run(args.sizes, args.rounds, args.label, args.out, "; ".join(args.note))
    return 0


if __name__ == "__main__":
    sys.exit(main())
