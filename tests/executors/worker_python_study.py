"""A study as a user runs it: ``python worker_python_study.py CHECKOUT EXECUTOR``.

Started by tests/executors/test_worker_python.py with a virtual environment's
interpreter called by its path, that environment off ``PATH``, no ``PYTHONPATH``
and a temporary working directory. ``CHECKOUT`` goes on ``sys.path`` here, in
the driver only (as an installed package sits in the driver's site-packages),
never in the environment the workers inherit. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys

sys.path.insert(0, sys.argv[1])

import ecopt  # noqa: E402


def objective(trial: ecopt.Trial) -> dict[str, float]:
    """Reports which Python ran it and where its ecopt came from (sent by value: __main__)."""
    import ecopt as worker_ecopt

    trial.set_user_attr("python", sys.executable)
    trial.set_user_attr("ecopt", worker_ecopt.__file__)
    x = float(trial["x"])
    return {"f1": x, "f2": (1.0 - x) ** 2}


def make_study(storage: str) -> ecopt.Study:
    return ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1)}),
                       [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                       storage=storage, sampler="random", meter="estimate", seed=0)


def main() -> None:
    name = sys.argv[2]
    out: dict[str, object] = {}
    recs = make_study("study").optimize(objective, n_trials=6, batch_size=2, executor=name)
    out["records"] = [{"state": r.state.value, "worker": r.worker, **r.user_attrs,
                       "error": r.error.message if r.error else ""} for r in recs]
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
