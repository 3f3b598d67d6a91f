"""Earlier studies as transfer sources of a new one (``Study(..., transfer_from=[...])``).

A source is read read-only: its complete trials inform the new study's model
and initial design (:mod:`ecopt.samplers._transfer`), never its log, front,
counts, ``n_trials`` or budget. What was used is recorded in ``study.json``
(``"transfer"``: path, study id, number of records and a hash of them), so a
reopened study proposes what it would have.

Matching rules (a source is mapped into the new study's space):

- Parameters match by name. A numeric value outside the new bounds is clipped
  to them (and snapped to an integer's step); a categorical value (also a
  number, where one side lists its values as choices) maps by value, and a source trial whose value is not among the new choices is
  dropped (counted in ``dropped``).
- A parameter only the source has is marginalised: its trials inform the new
  study at whatever value they had.
- A parameter only the new study has: the source's trials are placed at the
  middle of its range (a categorical's first choice, a fixed value as it is).
- ``transfer_map`` (``Study(..., transfer_map={"power_limit": "relative"})``)
  maps a numeric parameter by its share of the range instead of by value: a
  source value at a share ``u`` of the source's range (its position between the
  lowest and highest allowed values: a stepped integer's last step, the smallest
  and largest numeric choice; on a log scale where the parameter has one) goes to
  the same share of the new range, the nearest allowed value (ties to the lower,
  computed exactly). For settings whose meaning is relative to the machine, such
  as a GPU power limit (the A40 runs to 300 W, the V100 to 250 W). A source whose
  range is a single value (a ``Fixed`` value or one choice) maps to the middle.
- Objectives match by name and direction. A source lacking one of the new
  objectives informs the others (its trials enter the model of the objectives it
  has, and its trust is judged on them). A source sharing no objective, an
  objective with the other direction, or a parameter that is numeric on one side
  and categorical on the other is a :class:`~ecopt.errors.TransferSourceError`
  naming it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ecopt._spec import read_core
from ecopt._types import Params
from ecopt.errors import TransferSourceError
from ecopt.objective import Objective
from ecopt.space import Categorical, Fixed, Float, Int, Parameter, SearchSpace
from ecopt.storage import StudyStorage
from ecopt.record import TrialRecord, TrialState, make_record

__all__ = ["MAP_RULES", "SourceStudy", "check_map", "load_sources", "map_relative",
           "records_hash", "study_id"]

#: How a matched numeric parameter is carried over (``transfer_map``'s values):
#: ``"value"`` (the default: the same value, clipped to the new bounds) or
#: ``"relative"`` (the same share of the range).
MAP_RULES = ("value", "relative")


def study_id(spec: Mapping[str, Any]) -> str:
    """A stable id of a study: a hash of its name and creation time (12 hex digits)."""
    sid = spec.get("study_id")
    if isinstance(sid, str) and sid:
        return sid
    key = f"{spec.get('name', '')}|{spec.get('created_at', '')}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def records_hash(records: Sequence[TrialRecord]) -> str:
    """SHA-256 (first 16 hex digits) of the records' numbers, states, params and values."""
    rows = [[r.number, r.state.value, r.params, r.values] for r in records]
    text = json.dumps(rows, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class SourceStudy:
    """One transfer source, mapped into the new study's space.

    Attributes:
        label: The path (or ``"<in-memory study NAME>"``).
        path: The study directory, or ``None`` for an in-memory study.
        study_id: :func:`study_id` of the source.
        n_records: How many of its records are used (the first ``n_records``;
            trials it gained later are ignored, so a reopen proposes the same).
        hash: :func:`records_hash` of those records.
        objectives: The new study's objective names the source has.
        records: Its complete trials mapped into the new space (values of the
            shared objectives only), in the source's order.
        dropped: Source trials that could not be mapped (a categorical value
            not among the new choices; a non-numeric value).
        rules: Parameter name -> the rule applied (``"matched"``, ``"clipped"``,
            ``"source only: marginalised"``, ``"new only: middle of its range"``...).
    """

    label: str
    path: str | None
    study_id: str
    n_records: int
    hash: str
    objectives: list[str]
    records: list[TrialRecord] = field(default_factory=list)
    dropped: int = 0
    rules: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """What ``study.json`` records of the source."""
        return {"path": self.path, "label": self.label, "study_id": self.study_id,
                "n_records": self.n_records, "hash": self.hash, "objectives": self.objectives,
                "mapped": len(self.records), "dropped": self.dropped, "rules": self.rules}


def _fill(param: Parameter) -> Any:
    """The value a source trial takes for a parameter only the new study has."""
    if isinstance(param, Fixed):
        return param.value
    if isinstance(param, Categorical):
        return param.choices[0]
    return param.decode(0.5)


def _kind(param: Parameter) -> str:
    if isinstance(param, Categorical):
        numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool)
                      for c in param.choices)
        return "numeric" if numeric else "categorical"
    if isinstance(param, Fixed):
        return "fixed"
    return "numeric"


def check_map(space: SearchSpace, transfer_map: Mapping[str, str] | None) -> dict[str, str]:
    """``transfer_map`` checked against the new study's ``space``: ``{name: rule}``, the
    ``"value"`` entries left out (the default).

    Raises:
        ValueError: not a mapping, a name that is not a parameter of ``space``, one that
            is not numeric, or a rule not in :data:`MAP_RULES`.
    """
    if transfer_map is None:
        return {}
    if not isinstance(transfer_map, Mapping):
        raise ValueError("transfer_map must map parameter names to a rule in "
                         f"{list(MAP_RULES)}, got transfer_map={transfer_map!r}")
    out: dict[str, str] = {}
    for name, rule in transfer_map.items():
        if name not in space:
            raise ValueError(f"transfer_map names {name!r}, which is not a parameter of this "
                             f"study's space (it has {list(space)})")
        if rule not in MAP_RULES:
            raise ValueError(f"transfer_map[{name!r}] must be one of {list(MAP_RULES)}, "
                             f"got {rule!r}")
        if rule != "value" and _kind(space[name]) != "numeric":
            raise ValueError(f"transfer_map[{name!r}] = {rule!r} needs a numeric parameter "
                             f"(a range to take a share of); {name!r} is {_kind(space[name])}")
        if rule != "value":
            out[name] = rule
    return out


def _numeric_range(param: Parameter) -> tuple[Any, Any, bool] | None:
    """``(lowest, highest allowed value, log scale?)`` of a numeric parameter (``None``:
    not numeric). A stepped ``Int``'s highest is its last step, not a ``high`` between
    steps, so a range means the same whether it is declared stepped or as choices."""
    if isinstance(param, Float):
        return param.low, param.high, param.log
    if isinstance(param, Int):
        return param.low, param.low + (param.high - param.low) // param.step * param.step, \
            param.log
    if isinstance(param, Categorical) and _kind(param) == "numeric":
        return min(param.choices), max(param.choices), False
    if isinstance(param, Fixed) and _finite_number(param.value):
        return param.value, param.value, False
    return None


def _share(param: Parameter, value: Any) -> Fraction | float | None:
    """Where ``value`` lies in ``param``'s range, in [0, 1]: exact (a ``Fraction``) on a
    linear scale, so that a tie stays a tie; ``None`` for a range of one value."""
    rng = _numeric_range(param)
    if rng is None or rng[1] == rng[0]:
        return None
    lo, hi, log = rng
    if log:
        u: Fraction | float = (math.log(value) - math.log(lo)) / (math.log(hi) - math.log(lo))
    else:
        u = (Fraction(value) - Fraction(lo)) / (Fraction(hi) - Fraction(lo))
    return min(1, max(0, u))


def map_relative(value: Any, src_param: Parameter, param: Parameter) -> Any:
    """``value`` of ``src_param`` moved to the same share of ``param``'s range (on a log
    scale where the parameter has one): the nearest allowed value of ``param``, ties to
    the lower; the middle of ``param``'s range when ``src_param`` has a single value
    (a one-value ``Fixed`` or choice list).

    Raises:
        ValueError: ``value`` is not a finite number, or a parameter is not numeric.
    """
    if not _finite_number(value):
        raise ValueError(f"map_relative needs a finite number, got value={value!r}")
    for which, p in (("src_param", src_param), ("param", param)):
        if _numeric_range(p) is None:
            raise ValueError(f"map_relative needs numeric parameters (a range to take a share "
                             f"of); {which} is {p!r}")
    if (src_param.log if isinstance(src_param, (Float, Int)) else False) and value <= 0:
        raise ValueError(f"map_relative: a log-scaled parameter's value must be > 0, "
                         f"got value={value!r}")
    u = _share(src_param, value)
    u = Fraction(1, 2) if u is None else u
    lo, hi, log = _numeric_range(param)  # type: ignore[misc]
    if isinstance(param, Float) or (isinstance(param, Int) and log):
        return param.decode(float(u))  # Int on a log scale: the nearer integer in log space
    want = Fraction(lo) + Fraction(u) * (Fraction(hi) - Fraction(lo))
    if isinstance(param, Int):
        k = math.floor((want - param.low) / param.step)
        last = (hi - param.low) // param.step
        allowed: Sequence[Any] = [param.low + j * param.step
                                  for j in sorted({min(last, max(0, k)),
                                                   min(last, max(0, k + 1))})]
    elif isinstance(param, Fixed):
        return param.value
    else:
        allowed = param.choices  # type: ignore[attr-defined]
    return min(allowed, key=lambda v: (abs(Fraction(v) - want), Fraction(v)))


def _finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) \
        and math.isfinite(value)


def _map_value(name: str, param: Parameter, value: Any) -> tuple[Any, bool]:
    """``(value in the new space, clipped?)``; ``(None, False)`` when it has no image."""
    if isinstance(param, Fixed):
        return param.value, False
    if isinstance(param, Categorical):
        try:
            return param.validate(value, name), False
        except (ValueError, TypeError):
            return None, False
    if not _finite_number(value):
        return None, False
    assert isinstance(param, (Float, Int))
    low, high = float(param.low), float(param.high)
    clipped = min(high, max(low, float(value)))
    out = param.decode(param.encode(clipped))
    return out, clipped != float(value)


def map_into(space: SearchSpace, objectives: Sequence[Objective], src_space: SearchSpace,
             src_objectives: Sequence[Objective], records: Sequence[TrialRecord],
             label: str, transfer_map: Mapping[str, str] | None = None
             ) -> tuple[list[TrialRecord], int, dict[str, str], list[str]]:
    """Map a source's complete trials into ``space`` (the module's rules;
    ``transfer_map``: :func:`check_map`'s result, parameters mapped by share).

    Returns:
        ``(mapped records, dropped, parameter rules, shared objective names)``.

    Raises:
        TransferSourceError: an objective with the other direction, no shared
            objective, or a parameter of another kind on each side.
    """
    src_dirs = {o.name: o.direction for o in src_objectives}
    shared = []
    for o in objectives:
        if o.name not in src_dirs:
            continue
        if src_dirs[o.name] != o.direction:
            raise TransferSourceError(
                f"transfer source {label}: objective {o.name!r} is {src_dirs[o.name]!r} there "
                f"and {o.direction!r} here; objectives match by name and direction")
        shared.append(o.name)
    if not shared:
        raise TransferSourceError(
            f"transfer source {label} shares no objective with this study (it has "
            f"{sorted(src_dirs)}, this study {[o.name for o in objectives]}); objectives "
            "match by name")
    rules: dict[str, str] = {}
    # parameters mapped by share: asked for, and numeric on both sides
    relative = {n for n, rule in (transfer_map or {}).items() if rule == "relative"}
    for name, param in space.items():
        if name not in src_space:
            relative.discard(name)
            rules[name] = f"new only: source trials at {_fill(param)!r}"
            continue
        a, b = _kind(src_space[name]), _kind(param)
        if "fixed" not in (a, b) and a != b:
            raise TransferSourceError(
                f"transfer source {label}: parameter {name!r} is {a} there and {b} here; "
                "it cannot be matched (rename one, or leave the source out)")
        rules[name] = "matched"
        rng = _numeric_range(src_space[name])
        if name in relative and b == "numeric" and rng is not None:
            rules[name] = "relative: the source had one value; the middle of the range" \
                if rng[0] == rng[1] else "relative: same share of the range"
        else:
            relative.discard(name)
    for name in src_space:
        if name not in space:
            rules[name] = "source only: marginalised"
    out: list[TrialRecord] = []
    dropped = 0
    for r in records:
        if r.state is not TrialState.COMPLETE or not r.feasible or r.unreliable:
            continue
        params: Params = {}
        ok = True
        for name, param in space.items():
            if name not in r.params:
                params[name] = _fill(param)
                continue
            if name in relative:
                if not _finite_number(r.params[name]):
                    ok = False
                    break
                params[name] = map_relative(r.params[name], src_space[name], param)
                continue
            v, clipped = _map_value(name, param, r.params[name])
            if v is None:
                ok = False
                break
            if clipped:
                rules[name] = "clipped to this study's bounds"
            params[name] = v
        values = {k: float(r.values[k]) for k in shared if k in r.values
                  and isinstance(r.values[k], (int, float)) and math.isfinite(r.values[k])}
        if not ok or len(values) != len(shared):
            dropped += 1
            continue
        out.append(make_record(number=-1 - len(out), state=TrialState.COMPLETE, params=params,
                               values=values, proposed_by="transfer"))
    return out, dropped, rules, shared


@dataclass(frozen=True)
class _Opened:
    """A source as transfer reads it (what it needs of a :class:`~ecopt.Study`)."""

    name: str
    spec: Mapping[str, Any]
    records: list[TrialRecord]
    space: SearchSpace
    objectives: list[Objective]


def _open(src: Any) -> tuple[_Opened, str, str | None]:
    """``(the source, label, path)`` of a directory or a Study.

    A directory is read through its storage alone, and a study object by what it
    holds, so this module never imports :mod:`ecopt.study` (which imports it).
    """
    if isinstance(src, (str, Path)):
        p = Path(src)
        if not (p / "study.json").is_file():
            raise TransferSourceError(
                f"transfer source {str(p)!r} is not a study directory (no study.json there): "
                "it is gone or was never a study. Restore it, or open the study without it")
        st = StudyStorage(p, writable=False)
        spec = st.read_spec()
        space, objectives, _ = read_core(spec, p)
        return (_Opened(str(spec.get("name") or ""), spec, st.read_records(), space,
                        objectives), str(p), str(p.resolve()))
    if all(hasattr(src, a) for a in ("space", "objectives", "records", "spec", "name", "path")):
        path = str(src.path) if src.path is not None else None
        return (_Opened(src.name, src.spec, list(src.records), src.space, list(src.objectives)),
                path or f"<in-memory study {src.name!r}>", path)
    raise TransferSourceError(
        f"transfer_from takes study directories or ecopt.Study objects, got {src!r}")


def load_sources(transfer_from: Sequence[Any], space: SearchSpace,
                 objectives: Sequence[Objective],
                 recorded: Sequence[Mapping[str, Any]] | None = None,
                 transfer_map: Mapping[str, str] | None = None) -> list[SourceStudy]:
    """Open and map each source; with ``recorded`` (study.json's list), check them.

    Args:
        transfer_from: Directories or :class:`~ecopt.Study` objects.
        space, objectives: The new study's.
        recorded: What a study recorded when it was created: each source must
            still hold those records (same first ``n_records``, same hash).
        transfer_map: Parameters mapped by their share of the range
            (:func:`check_map`; the module's rules).

    Raises:
        TransferSourceError: a source is gone, changed, or cannot be matched; when a
            study is created, also a source given twice or one with no trial that maps.
    """
    rel = check_map(space, transfer_map)
    out: list[SourceStudy] = []
    for i, src in enumerate(transfer_from):
        study, label, path = _open(src)
        sid = study_id(study.spec) if study.spec else study_id({"name": study.name})
        records = list(study.records)
        if recorded is not None:
            want = recorded[i]
            n = int(want.get("n_records", 0))
            if len(records) < n or records_hash(records[:n]) != want.get("hash"):
                raise TransferSourceError(
                    f"transfer source {label} changed since this study was created: it recorded "
                    f"{n} trials with hash {want.get('hash')}, the source now holds "
                    f"{len(records)} whose first {min(n, len(records))} hash to "
                    f"{records_hash(records[:n])}; proposals would differ. Restore the source, "
                    "or start a new study")
            records = records[:n]
        mapped, dropped, rules, shared = map_into(space, objectives, study.space,
                                                  study.objectives, records, label, rel)
        digest = records_hash(records)
        if recorded is None:
            twice = [s.label for s in out if (s.path and path and Path(s.path).resolve()
                                              == Path(path).resolve())
                     or (s.study_id == sid and s.hash == digest)]
            if twice:
                raise TransferSourceError(
                    f"transfer source {label} is given twice (as {twice[0]}); each source "
                    "would be a task of the model twice over. Give it once")
            if not mapped:
                raise TransferSourceError(
                    f"transfer source {label} has no complete trial that maps into this "
                    f"study ({len(records)} record(s), {dropped} complete one(s) dropped by "
                    "the matching rules); it would inform nothing. Leave it out, or run "
                    "it first")
        out.append(SourceStudy(label, path, sid, len(records), digest, shared, mapped, dropped,
                               rules))
    return out
