"""``ecopt import-optuna STORAGE_URL --study NAME DIR``: an Optuna study as an ecopt study.

The directory is written through ecopt's storage layer
(:class:`~ecopt.storage.StudyStorage`): ``study.json`` (space, objectives,
constraints, where it came from and what could not be carried over) and
``trials.jsonl`` (one record per finished trial, in trial-number order), so
``ecopt show``, ``ecopt report``, ``ecopt dashboard`` and ``ecopt.load_study``
read it like any study.

What maps to what:

* distributions -> parameters: ``FloatDistribution`` -> ``Float`` (log kept;
  a ``step`` is not: ecopt floats have none), ``IntDistribution`` -> ``Int``
  (log, step), ``CategoricalDistribution`` -> ``Categorical`` (choices that
  are not JSON strings or numbers, e.g. ``None``, are stored as their
  ``repr()``), a one-value distribution -> ``Fixed``; trials that used several
  distributions for one name get one dimension spanning them;
* directions -> objectives named ``--objectives``, else Optuna's
  ``metric_names``, else ``objective_0``, ``objective_1``...;
* states: COMPLETE -> complete (constraints as metrics ``constraint_<key>``
  with ``feasible``), FAIL -> failed (its ``fail_reason`` as the error;
  *infeasible* when that reason is an out-of-memory error), PRUNED -> pruned,
  RUNNING -> a started trial in ``running.jsonl`` (shown as running; opening
  the directory with ``ecopt.Study`` records it interrupted), WAITING
  (enqueued, never started) -> not imported;
* intermediate values -> the learning curve (single-objective studies);
* phases metered by :func:`~ecopt.integrations.optuna.metered` (user attributes
  ``ecopt.phase.<name>``) -> the trial's phases, with their meter and provenance;
* user attributes -> user attributes; the sampler's proposals (``EcoptSampler``
  writes ``ecopt:proposed_by``) -> ``proposed_by`` (else ``optuna``, or
  ``user`` for enqueued trials).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecopt._version import __version__
from ecopt.errors import EcoptError
from ecopt.integrations.optuna._convert import (
    CONSTRAINT_PREFIX,
    RELATIVE_PARAMS_KEY,
    constraint_values,
    import_space,
    imported_params,
    objective_names,
    trial_record,
    utc_iso,
)
from ecopt.objective import Constraint, Objective
from ecopt.storage import RUNNING_FILE, STUDY_FILE, TRIALS_FILE, StudyStorage
from ecopt.trial import TrialRecord

__all__ = ["import_study", "ImportResult", "open_storage", "cli_main"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
#: System attributes whose meaning the import keeps (as constraints, errors, proposers).
_KNOWN_SYSTEM_ATTRS = ("constraints", "fail_reason", "fixed_params", "ecopt:")


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_study` wrote.

    Attributes:
        path: The ecopt study directory.
        study_name: The Optuna study's name.
        counts: ecopt state -> number of trials written to ``trials.jsonl``.
        running: Trials written as started (RUNNING in Optuna).
        not_imported: Trials left out (WAITING), by reason.
        not_carried: What could not be carried over, one sentence each.
    """

    path: Path
    study_name: str
    counts: dict[str, int]
    running: int
    not_imported: dict[str, int] = field(default_factory=dict)
    not_carried: list[str] = field(default_factory=list)


def _redact(url: str) -> str:
    """The storage URL without a password (``mysql://user:***@host/db``)."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def open_storage(url: str) -> Any:
    """An Optuna storage for ``url``: any RDB URL Optuna accepts (``sqlite:///...``,
    ``postgresql://...``), or the path of a journal file or of an SQLite file.

    Raises:
        ValueError: when nothing Optuna can read is at ``url``.
    """
    import optuna

    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"STORAGE_URL must be an Optuna storage URL or a journal file, "
                         f"got {url!r}")
    if "://" in url:
        if url.startswith("sqlite:///"):
            path = url[len("sqlite:///"):]
            if path and path != ":memory:" and not Path(path).is_file():
                raise ValueError(f"no SQLite file at {path!r} (from {url!r}); Optuna would "
                                 "create an empty one")
        try:
            return optuna.storages.RDBStorage(url, skip_table_creation=True)
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy/driver errors of any kind
            raise ValueError(f"cannot open Optuna storage {_redact(url)!r}: "
                             f"{type(exc).__name__}: {exc}") from None
    p = Path(url)
    if not p.is_file():
        raise FileNotFoundError(f"no Optuna storage at {url!r}: not a URL (sqlite:///..., "
                                "postgresql://...) and no such journal or SQLite file")
    with open(p, "rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if head == _SQLITE_MAGIC:
        return open_storage(f"sqlite:///{p.resolve()}")
    from optuna.storages.journal import JournalFileBackend

    try:
        return optuna.storages.JournalStorage(JournalFileBackend(str(p)))
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{url!r} is not an Optuna journal file: {type(exc).__name__}: "
                         f"{exc}") from None


def _load(storage: Any, url: str, name: str | None) -> Any:
    import optuna

    try:
        names = optuna.get_all_study_names(storage)
    except Exception as exc:  # noqa: BLE001 - an RDB without Optuna's tables, a bad journal
        raise ValueError(f"{_redact(url)!r} holds no Optuna studies that can be read: "
                         f"{type(exc).__name__}: {exc}") from None
    if name is None:
        if len(names) != 1:
            raise ValueError(f"{_redact(url)!r} holds {len(names)} studies {names}; name one "
                             "with --study NAME")
        name = names[0]
    if name not in names:
        raise ValueError(f"no study named {name!r} in {_redact(url)!r}; it holds {names}")
    return optuna.load_study(study_name=name, storage=storage)


def _move_aside(path: Path) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    dest, k = path / f"replaced-{stamp}", 1
    while dest.exists():
        k += 1
        dest = path / f"replaced-{stamp}-{k}"
    dest.mkdir()
    for f in (STUDY_FILE, TRIALS_FILE, RUNNING_FILE):
        if (path / f).exists():
            shutil.move(str(path / f), str(dest / f))
    return dest


def import_study(storage_url: str, study_name: str | None, out_dir: str | os.PathLike[str], *,
                 objectives: Sequence[str] | None = None, overwrite: bool = False
                 ) -> ImportResult:
    """Write the Optuna study ``study_name`` of ``storage_url`` as an ecopt study directory.

    Args:
        storage_url: Any storage URL Optuna accepts (``sqlite:///optuna.db``...),
            or the path of a journal file (``JournalFileBackend``) or SQLite file.
        study_name: The study (``None``: the storage's only study).
        out_dir: The ecopt study directory to write (created).
        objectives: Names for the objectives, one per direction (default:
            Optuna's ``metric_names``, else ``objective_<i>``).
        overwrite: When ``out_dir`` already holds a study, move its files to
            ``replaced-<time>/`` inside it (never deleted) and import afresh.

    Returns:
        An :class:`ImportResult` (counts, and what was not carried over).

    Raises:
        ValueError: for a storage or study that cannot be read, objective names
            that do not fit, or a study without parameters.
        FileNotFoundError: when ``storage_url`` is neither a URL nor a file.
        EcoptError: when ``out_dir`` holds a study and ``overwrite`` is false,
            or another process writes to it.
    """
    import optuna
    from optuna.trial import TrialState as OState

    storage = open_storage(storage_url)
    study = _load(storage, storage_url, study_name)
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    names = objective_names(len(study.directions), study.metric_names, objectives)
    started = [t for t in trials if t.state is not OState.WAITING]
    space, params_map, notes = import_space(started)
    if space is None:
        raise ValueError(f"Optuna study {study.study_name!r} has no trial with a parameter; "
                         "an ecopt study needs a search space")

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{str(out)!r} is not a directory")
    if (out / STUDY_FILE).exists() or (out / TRIALS_FILE).exists() or \
            (out / RUNNING_FILE).exists():
        if not overwrite:
            raise EcoptError(f"{str(out)!r} already holds a study; choose another directory, "
                             "or pass --overwrite (its files are moved to replaced-<time>/, "
                             "never deleted)")
    st = StudyStorage(out, writable=True)
    try:
        if overwrite and ((out / STUDY_FILE).exists() or (out / TRIALS_FILE).exists()
                          or (out / RUNNING_FILE).exists()):
            moved = _move_aside(out)
            notes.append(f"the study that was in {str(out)!r} was moved to {str(moved)!r}")
        return _write(st, study, trials, names, space, params_map, notes, storage_url)
    finally:
        st.close()


def _write(st: StudyStorage, study: Any, trials: Sequence[Any], names: list[str], space: Any,
           params_map: dict[str, Any], notes: list[str], url: str) -> ImportResult:
    import optuna
    from optuna.study import StudyDirection
    from optuna.trial import TrialState as OState

    keys: list[str] = []
    for t in trials:
        keys += [k for k in constraint_values(t) if k not in keys]
    records: list[TrialRecord] = []
    running: list[Any] = []
    waiting = 0
    extra_attrs: set[str] = set()
    no_energy = 0
    outside = 0
    for t in trials:
        extra_attrs |= {k for k in t.system_attrs if not k.startswith(_KNOWN_SYSTEM_ATTRS)}
        if t.state is OState.WAITING:
            waiting += 1
            continue
        p = imported_params(t.params, params_map)
        left = {k: v for k, v in t.params.items() if k not in params_map}
        if t.state is OState.RUNNING:
            running.append((t, p))
            continue
        rec = trial_record(t, names, lambda ft: p)
        if rec is None:  # pragma: no cover - every finished state maps
            continue
        if left:
            outside += 1
            rec = _with_user_attr(rec, "optuna_params", left)
        if not rec.phases:
            no_energy += 1
        records.append(rec)

    objectives = [Objective(n, "min" if d == StudyDirection.MINIMIZE else "max")
                  for n, d in zip(names, study.directions)]
    constraints = [Constraint(f"{CONSTRAINT_PREFIX}{k}", "<=", 0.0) for k in keys]
    meters = sorted({ph.measurement.meter for r in records for ph in r.phases.values()})
    measured = [ph.measured for r in records for ph in r.phases.values()]
    if no_energy:
        notes.append(f"{no_energy} trial(s) have no phase metered by "
                     "ecopt.integrations.optuna.metered(): their energy is unknown (no phases, "
                     "0 J) and they add nothing to energy figures")
    if any(r.intermediate for r in records):
        notes.append("intermediate values are the learning curves; the energy and time at "
                     "each report are unknown (0 in the curve)")
    if len(names) > 1 and any(t.intermediate_values for t in trials):
        notes.append("intermediate values of a multi-objective study are not imported (ecopt "
                     "curves name the objective each value belongs to)")
    if extra_attrs:
        notes.append(f"Optuna system attributes of trials are not kept (sampler internals): "
                     f"{sorted(extra_attrs)[:8]}{' ...' if len(extra_attrs) > 8 else ''}")
    study_attrs = [k for k in _study_system_attrs(study) if k != "study:metric_names"]
    if study_attrs:
        notes.append(f"the study's Optuna system attributes are not kept ({study_attrs[:8]})")
    if waiting:
        notes.append(f"{waiting} WAITING trial(s) (enqueued, never started) are not imported")
    if running:
        notes.append(f"{len(running)} RUNNING trial(s) are imported as started, not finished "
                     "(shown as running; opening the directory with ecopt.Study records them "
                     "as interrupted)")
    if outside:
        notes.append(f"{outside} trial(s) have parameters that fit no ecopt dimension; their "
                     "values are kept in user_attrs['optuna_params']")
    notes.append("host, worker and device of each trial are unknown to Optuna; start times "
                 "are Optuna's (local time of the machine that ran them, read as this "
                 "machine's time zone)")
    spec = {
        "name": study.study_name,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "space": space.to_dict(),
        "objectives": [o.to_dict() for o in objectives],
        "constraints": [c.to_dict() for c in constraints],
        "sampler": {"name": "optuna", "note": "trials proposed in Optuna; each trial's "
                    "proposed_by says by whom where known"},
        "meter": {"meter": "+".join(meters) if meters else "none",
                  "measured": bool(measured) and all(measured),
                  "note": "phases metered by ecopt.integrations.optuna.metered(); each phase "
                          "keeps its own meter and provenance"},
        "pruner": None,
        "seed": None,
        "ecopt_version": __version__,
        "host": {},
        "sessions": [],
        "imported_from": {
            "tool": "optuna", "optuna_version": optuna.__version__, "storage": _redact(url),
            "study_name": study.study_name,
            "directions": [d.name.lower() for d in study.directions],
            "metric_names": study.metric_names, "user_attrs": _jsonable(study.user_attrs),
            "imported_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "not_carried": list(notes),
        },
    }
    st.write_spec(spec)
    for rec in records:
        st.append_record(rec)
    for t, p in running:
        proposed = t.system_attrs.get("ecopt:proposed_by")
        relative = t.system_attrs.get(RELATIVE_PARAMS_KEY)
        if isinstance(relative, dict):  # drawn but not suggested yet: what it will run
            p = {**imported_params(relative, params_map), **p}
        st.mark_running(int(t.number), p, proposed if isinstance(proposed, str) else "optuna",
                        {}, utc_iso(t.datetime_start))
    counts: dict[str, int] = {}
    for r in records:
        counts[r.state.value] = counts.get(r.state.value, 0) + 1
    return ImportResult(st.path, study.study_name, counts, len(running),
                        {"waiting": waiting} if waiting else {}, notes)


def _study_system_attrs(study: Any) -> list[str]:
    storage = study._storage  # the storage the study was loaded from (ours)
    try:
        sid = storage.get_study_id_from_name(study.study_name)
        return sorted(storage.get_study_system_attrs(sid))
    except Exception:  # noqa: BLE001 - only for the notes
        return []


def _with_user_attr(rec: TrialRecord, key: str, value: Any) -> TrialRecord:
    from dataclasses import replace

    return replace(rec, user_attrs={**rec.user_attrs, key: _jsonable(value)})


def _jsonable(d: Any) -> Any:
    try:
        json.dumps(d)
        return d
    except (TypeError, ValueError):
        if isinstance(d, dict):
            return {str(k): _jsonable(v) for k, v in d.items()}
        return repr(d)


def cli_main(args: argparse.Namespace) -> int:
    """``ecopt import-optuna``: exit 0 when the directory was written (what could not be
    carried over is printed on stderr), 2 on errors (raised; :func:`ecopt.cli.main` prints
    the one line)."""
    import logging

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    objectives = None
    if args.objectives:
        objectives = [s for s in args.objectives.split(",")]
    res = import_study(args.storage_url, args.study, args.out_dir, objectives=objectives,
                       overwrite=args.overwrite)
    if getattr(args, "json", False):
        from ecopt.fmt import json_text

        print(json_text({"study": res.study_name, "path": str(res.path), "trials": res.counts,
                         "running": res.running, "not_carried_over": list(res.not_carried)}))
        return 1 if res.not_carried and getattr(args, "strict", False) else 0
    done = ", ".join(f"{n} {s}" for s, n in sorted(res.counts.items())) or "no finished trial"
    run = f", {res.running} running" if res.running else ""
    print(f"imported Optuna study {res.study_name!r} into {res.path}: {done}{run}")
    for note in res.not_carried:
        print(f"ecopt import-optuna: not carried over: {note}", file=sys.stderr)
    print(f"read it with: ecopt show {res.path}   (or ecopt report / ecopt dashboard)")
    # --strict: something that could not be carried over counts as a warning.
    return 1 if res.not_carried and getattr(args, "strict", False) else 0

