"""The ``ecopt`` command.

Each subcommand's arguments are declared here; its work is done by a
``(module, function)`` handler imported only when that subcommand runs, so
``ecopt --help`` stays fast. Handlers take the parsed ``argparse.Namespace`` and
return an exit status. Library errors (``EcoptError``, ``ValueError``,
``FileNotFoundError``) become a one-line message and exit status 2, never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from ecopt._version import __version__

__all__ = ["main", "build_parser"]

# command -> (module, function)
_HANDLERS: dict[str, tuple[str, str]] = {
    "quickstart": ("ecopt.quickstart", "cli_main"),
    "meters": ("ecopt.meters.probe", "cli_main"),
    "report": ("ecopt.report.cli", "report_main"),
    "plot": ("ecopt.report.cli", "plot_main"),
    "compare": ("ecopt.report.cli", "compare_main"),
    "show": ("ecopt.report.cli", "show_main"),
    "profile": ("ecopt.data.profiler", "cli_main"),
    "dashboard": ("ecopt.report.dashboard", "dashboard_main"),
    "repair": ("ecopt.storage", "repair_main"),
    "import-optuna": ("ecopt.integrations.optuna.importer", "cli_main"),
    "gpu": ("ecopt.meters.power_limit", "gpu_cli_main"),
}


def _add_quickstart(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quickstart",
        help="run a real study end to end on CPU: a small torch MLP on scikit-learn digits",
        description="Search width, depth, learning rate and batch size of a small torch "
                    "MLP on scikit-learn's digits (shipped, no download) for accuracy (max) "
                    "and inference samples/J (max); write the study directory and print the "
                    "Pareto front with each energy figure's source.")
    p.add_argument("--trials", type=int, default=24,
                   help="trials the study holds in the end (default 24): re-running resumes "
                        "the study in --out and runs only the trials still missing")
    p.add_argument("--out", default="runs/quickstart", help="study directory (default runs/quickstart)")
    p.add_argument("--sampler", default="qlognehvi",
                   help="qlognehvi (default), qnehvi, random, sobol or grid")
    p.add_argument("--meter", default="auto", help="meter name (default auto)")
    p.add_argument("--proposals-per-round", type=int, default=None, dest="q", metavar="Q",
                   help="points the sampler proposes together each round (default 1); not the "
                        "batch size of training, which the study itself searches")
    p.add_argument("--batch-size", type=int, default=None, dest="deprecated_batch_size", metavar="Q",
                   help="deprecated name of --proposals-per-round")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--epochs", type=int, default=4, help="training epochs per trial (default 4)")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh if --out holds a different study (old files kept aside)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress (a bar on a terminal, else one line per trial)")
    p.add_argument("--json", action="store_true",
                   help="print the result (front, hypervolume, energy source) as JSON")


def _add_meters(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("meters", help="show which energy meter 'auto' picks on this machine and why")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--probe-s", type=float, default=0.0,
                   help="also measure a window of this many seconds with the chosen meter")


def _add_reports(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report of a study directory")
    p.add_argument("run_dir", help="study directory")
    p.add_argument("--out", help="HTML file (default RUN_DIR/report.html)")
    p.add_argument("--png", help="also write each figure as PNG into this directory")
    p.add_argument("--baseline", type=int, help="trial number of the baseline configuration "
                   "for the payback figure")
    p.add_argument("--inferences", type=float, default=None,
                   help="inferences per deployment for lifecycle energy (optional)")
    p.add_argument("--phase", default=None,
                   help="per-item phase for payback and lifecycle energy (default: inference)")

    p = sub.add_parser("plot", help="draw one static Pareto plot (PNG/SVG/PDF)")
    p.add_argument("run_dir", help="study directory")
    p.add_argument("--x", help="metric on the x axis (default: first objective)")
    p.add_argument("--y", help="metric on the y axis (default: second objective)")
    p.add_argument("-o", "--out", default=None,
                   help="output file, its type from the suffix (default: RUN_DIR/front.png, "
                        "or RUN_DIR/front_<y>_vs_<x>.png with --x/--y; as report, into the study)")

    p = sub.add_parser("compare", help="overlay the fronts of several studies, hypervolume of each")
    p.add_argument("run_dirs", nargs="+", help="two or more study directories")
    p.add_argument("-o", "--out", help="also write the overlay plot to this file")
    p.add_argument("--ref-point", help="comma-separated shared reference point (default: inferred)")

    p = sub.add_parser("show", help="terminal summary of a study directory")
    p.add_argument("run_dir", help="study directory")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    sub.choices["compare"].add_argument("--json", action="store_true",
                                        help="print the comparison as JSON")



def _add_repair(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("repair", help="rebuild a lost study.json from the copy in running.jsonl")
    p.add_argument("run_dir", help="study directory")
    p.add_argument("--json", action="store_true", help="print what was restored as JSON")


def _add_profile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="diagnose an input pipeline's bottleneck (Plumber-style)")
    p.add_argument("workload", nargs="?", default="insurance",
                   help="insurance, movielens or images (default insurance)")
    p.add_argument("--backend", default="pandas", help="pandas, polars or dask")
    p.add_argument("--data", help="path to real data files (default: generated)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--prefetch-factor", type=int, default=2,
                   help="batches each worker prepares ahead (default 2)")
    p.add_argument("--cache", action="store_true",
                   help="profile with the in-memory cache of preprocessed data on")
    p.add_argument("--epochs", type=int, default=3,
                   help="epochs the predicted gains cover (default 3)")
    p.add_argument("--meter", default="auto", help="meter name (default auto)")
    p.add_argument("--compare-backends", action="store_true",
                   help="also trace the other dataframe backends (table workloads)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_dashboard(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="serve a live page of a (running) study on 127.0.0.1",
                       description="Serve, on 127.0.0.1 only and read-only, a page that shows "
                                   "the study while it runs: front, hypervolume over trials and "
                                   "over energy, trials with states and energy sources. "
                                   "Needs pip install 'ecopt[dashboard]'.")
    p.add_argument("run_dir", help="study directory (may be written by a running study)")
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; "
                   "0 picks a free one)")
    p.add_argument("--refresh-s", type=float, default=2.0, dest="refresh_s",
                   help="seconds between the page's refreshes (default 2)")


def _add_import_optuna(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-optuna", help="turn an Optuna study into an ecopt study directory",
        description="Write an Optuna study (any storage URL Optuna accepts, a journal file "
                    "or an SQLite file) as an ecopt study directory that ecopt show, report "
                    "and dashboard read. What cannot be carried over is printed. Needs "
                    "pip install 'ecopt[optuna]'.")
    p.add_argument("storage_url", help="sqlite:///optuna.db, postgresql://..., or the path "
                   "of a journal file")
    p.add_argument("out_dir", help="ecopt study directory to write")
    p.add_argument("--study", default=None,
                   help="Optuna study name (default: the storage's only study)")
    p.add_argument("--objectives", default=None,
                   help="comma-separated objective names, one per direction (default: "
                        "Optuna's metric_names, else objective_0, objective_1...)")
    p.add_argument("--overwrite", action="store_true",
                   help="OUT_DIR holds a study: move its files to replaced-<time>/ and "
                        "import afresh")
    p.add_argument("--json", action="store_true",
                   help="print what was imported and what was not carried over as JSON")


def _add_gpu(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gpu", help="GPU settings ecopt changed: restore power limits left behind",
                       description="GPU settings ecopt changes and keeps a record of.")
    gsub = p.add_subparsers(dest="gpu_command", metavar="ACTION")
    r = gsub.add_parser(
        "restore", help="put back the GPU power limits of processes that died holding them",
        description="Restore every GPU power limit recorded in the power-limit state file by a "
                    "process that is gone (killed while a trial held a limit); entries from an "
                    "earlier boot are dropped, live processes' entries left alone. Exit status: "
                    "0 nothing left to restore, 1 an entry could not be restored (kept; the "
                    "line says why), 2 bad input.")
    r.add_argument("--dry-run", action="store_true",
                   help="list what would be restored; change nothing")
    r.add_argument("--state", default=None,
                   help="the state file (default: $ECOPT_POWER_LIMIT_STATE, else "
                        "~/.local/state/ecopt/gpu-power-limits-<host>.json)")
    r.add_argument("--json", action="store_true", help="print JSON instead of lines")


_REGISTRARS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_quickstart, _add_meters, _add_reports, _add_profile, _add_repair, _add_dashboard,
    _add_import_optuna,
    _add_gpu,
]


#: Subcommands without ``--strict``: ``dashboard`` serves until stopped (no result to
#: judge), ``gpu`` has exit statuses of its own (1: a limit could not be restored).
NO_STRICT = ("dashboard", "gpu")
#: Subcommands without ``--json``: their result is a file (``report``, ``plot``) or a page
#: (``dashboard``); the exit status and the stderr lines say how it went.
NO_JSON = ("report", "plot", "dashboard")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (for docs and tests)."""
    parser = argparse.ArgumentParser(
        prog="ecopt",
        description="Energy-aware multi-objective hyperparameter optimisation.")
    parser.add_argument("--version", action="version", version=f"ecopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for reg in _REGISTRARS:
        reg(sub)
    for name, p in sub.choices.items():
        if name not in NO_STRICT:
            p.add_argument(
                "--strict", action="store_true",
                help="exit 1 when the command did its work but warned (default: 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ecopt`` console script."""
    from ecopt.errors import EcoptError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    module, func = _HANDLERS[args.command]
    import warnings

    # On the command line a warning is one line for the user, not a source listing.
    warnings.formatwarning = (lambda message, category, *_a, **_k:
                              f"ecopt {args.command}: {category.__name__}: {message}\n")
    warned = [0]
    show = warnings.showwarning

    def counting(*a: object, **k: object) -> None:
        warned[0] += 1
        show(*a, **k)  # type: ignore[arg-type]

    warnings.showwarning = counting
    try:
        handler = getattr(importlib.import_module(module), func)
        status = int(handler(args) or 0)
        # --strict: a warning on the way (a Python warning; the report commands also
        # count their own "warning:" lines) turns a success into exit status 1.
        return 1 if status == 0 and warned[0] and getattr(args, "strict", False) else status
    except (EcoptError, ValueError, FileNotFoundError, NotADirectoryError) as exc:
        print(f"ecopt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `ecopt ... | head`: the reader has what it wanted
        try:
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except KeyboardInterrupt:
        print(f"ecopt {args.command}: interrupted; the study log is intact", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = show


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
