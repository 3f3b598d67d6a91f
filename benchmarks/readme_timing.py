"""How long the README's and docs' first commands take on this machine, as a new user runs them.

Each command runs as a fresh process in a fresh temporary folder (imports,
start-up and writing the study included), one after the other; the table gives
its wall-clock seconds, the CPU seconds of the process and its children, and
the load average before and after (the machine's other work is a condition of
the number, so it is kept with it).

Commands (``--commands``, default all but ``tests``):

* ``quickstart``: ``ecopt quickstart`` with its defaults (24 trials);
* ``gemma_batch_quick``: ``python experiments/gemma_batch.py --quick --device cpu``;
* ``tests``: ``python -m pytest -q`` (the README's test command; the whole suite).

Usage:
    python benchmarks/readme_timing.py [--commands quickstart gemma_batch_quick]
        [--repeats 1] [--record [TAG]] [--note TEXT]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # ``python benchmarks/readme_timing.py``: docs.recorded from the root
    sys.path.insert(0, str(ROOT))

#: name -> (argv after the interpreter, given the temporary folder; what the README calls it)
COMMANDS: dict[str, tuple[object, str]] = {
    "quickstart": (lambda tmp: ["-m", "ecopt.cli", "quickstart", "--out", str(tmp / "qs")],
                   "ecopt quickstart"),
    "gemma_batch_quick": (lambda tmp: [str(ROOT / "experiments" / "gemma_batch.py"), "--quick",
                                       "--device", "cpu", "--out", str(tmp / "gb")],
                          "python experiments/gemma_batch.py --quick --device cpu"),
    "tests": (lambda tmp: ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests")],
              "python -m pytest"),
}


def _loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:  # pragma: no cover - not Linux
        return [float("nan")] * 3


def time_command(name: str, tmp: Path) -> dict[str, object]:
    """Run one command in a fresh process; its wall and CPU seconds, exit status and load.

    Raises:
        ValueError: for a command name not in :data:`COMMANDS`.
    """
    if name not in COMMANDS:
        raise ValueError(f"command must be one of {sorted(COMMANDS)}, got {name!r}")
    argv = COMMANDS[name][0](tmp)  # type: ignore[operator]
    before_load = _loadavg()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    # The README's commands as a user runs them: the tests from the checkout, with the
    # environment as it is (some tests check the progress output that ECOPT_QUIET hides);
    # the others in a fresh folder, without a progress bar.
    tests = name == "tests"
    env = dict(os.environ) if tests else dict(os.environ, ECOPT_QUIET="1")
    p = subprocess.run([sys.executable, *argv], cwd=ROOT if tests else tmp, env=env,
                       capture_output=True, text=True)
    wall_s = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
    return {"command": name, "wall_s": wall_s, "cpu_s": cpu_s, "rc": p.returncode,
            "load_before": before_load, "load_after": _loadavg()}


def main(argv: list[str] | None = None) -> int:
    """Time the commands, print the table, optionally record it."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commands", nargs="+", default=["quickstart", "gemma_batch_quick"],
                    choices=sorted(COMMANDS))
    ap.add_argument("--repeats", type=int, default=1, help="runs of each command (default 1)")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="TAG",
                    help="write a recorded run under docs/results/readme_timing/")
    ap.add_argument("--note", action="append", default=[], help="a caveat kept with the run")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        raise SystemExit(f"--repeats >= 1 must hold, got {args.repeats}")
    from docs.recorded import Table, command_line, git_commit, results_dir, write_run

    git = git_commit(ROOT)
    rows = []
    for name in args.commands:
        for rep in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="ecopt-timing-") as tmp:
                r = time_command(name, Path(tmp))
            lb, la = r["load_before"], r["load_after"]
            rows.append([COMMANDS[name][1], rep, round(float(r["wall_s"]), 1),  # type: ignore
                         round(float(r["cpu_s"]), 1), r["rc"], lb[0], la[0]])  # type: ignore
            print(f"{COMMANDS[name][1]} (run {rep}): {r['wall_s']:.1f} s wall, "
                  f"{r['cpu_s']:.1f} CPU s, exit {r['rc']}, load average {lb[0]} -> {la[0]}",
                  flush=True)
    table = Table(["command", "run", "wall s", "CPU s", "exit status", "load avg before (1 min)",
                   "load avg after (1 min)"], rows)
    if args.record is not None:
        out = results_dir("readme_timing", args.record or None, root=ROOT / "docs" / "results")
        run = write_run(out, script="benchmarks/readme_timing.py",
                        command=command_line("benchmarks/readme_timing.py", argv),
                        tables={"timing": table}, energy=None, git=git,
                        title="The README's commands, timed as a new user runs them",
                        notes=["one fresh process per command: the tests in the checkout, the "
                               "others in a fresh folder with ECOPT_QUIET=1 (no progress bar)",
                               *args.note])
        print(f"recorded: {run.path}")
    return 0 if all(r[4] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
