"""The study's own spec (space, objectives, constraints) and how a stored one differs from a given one.

``study.json`` keeps the spec a study was created with; re-opening a directory
with another one raises :class:`~ecopt.errors.SpecMismatchError`, whose message
:func:`differences` writes: each changed parameter, objective or constraint
with its stored and its given value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ecopt.errors import NotAStudyError
from ecopt.objective import Constraint, Objective
from ecopt.space import SearchSpace

__all__ = ["CORE_KEYS", "core_spec", "read_core", "differences"]

#: The keys of ``study.json`` that make two studies the same study.
CORE_KEYS = ("space", "objectives", "constraints")


def core_spec(space: SearchSpace, objectives: Sequence[Objective],
              constraints: Sequence[Constraint]) -> dict[str, Any]:
    """The spec as ``study.json`` stores it."""
    return {"space": space.to_dict(), "objectives": [o.to_dict() for o in objectives],
            "constraints": [c.to_dict() for c in constraints]}


def read_core(spec: Mapping[str, Any], path: Any
              ) -> tuple[SearchSpace, list[Objective], list[Constraint]]:
    """The space, objectives and constraints a stored ``study.json`` holds.

    Args:
        spec: The parsed ``study.json``.
        path: The study directory (named in the error).

    Raises:
        NotAStudyError: when one of them is missing or malformed.
    """
    try:
        space = SearchSpace.from_dict(spec["space"])
        objectives = [Objective.from_dict(o) for o in spec["objectives"]]
        constraints = [Constraint.from_dict(c) for c in spec.get("constraints", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise NotAStudyError(f"{str(path)!r}: study.json is malformed ({exc})") from None
    return space, objectives, constraints


def _show(kind: str, d: Any) -> str:
    """A stored dict as the constructor call that made it (JSON when it does not parse)."""
    try:
        if kind == "parameter":
            name, desc = d
            return repr(SearchSpace.from_dict({name: desc})[name])
        if kind == "objective":
            return repr(Objective.from_dict(dict(d)))
        if kind == "constraint":
            return repr(Constraint.from_dict(dict(d)))
    except (KeyError, TypeError, ValueError, AttributeError):
        pass
    return json.dumps(d[1] if kind == "parameter" else d, sort_keys=True, default=str)


def _named(items: Any) -> dict[str, Any] | None:
    """``name -> item`` of a list of dicts, or ``None`` when names are missing or repeat."""
    if not isinstance(items, list):
        return None
    names = [i.get("name") if isinstance(i, dict) else None for i in items]
    if None in names or len(set(names)) != len(names):
        return None
    return dict(zip(names, items))  # type: ignore[arg-type]


def _list_diff(kind: str, stored: Any, given: Any) -> list[str]:
    if stored == given:
        return []
    a, b = _named(stored), _named(given)
    if a is None or b is None:  # unnamed or repeated names: compare the lists whole
        return [f"{kind}s: stored {json.dumps(stored, default=str)}, given "
                f"{json.dumps(given, default=str)}"]
    out = []
    for name in a:
        if name not in b:
            out.append(f"{kind} {name!r} only in the stored study")
        elif a[name] != b[name]:
            out.append(f"{kind} {name!r}: stored {_show(kind, a[name])}, given "
                       f"{_show(kind, b[name])}")
    out += [f"{kind} {name!r} only in the given spec" for name in b if name not in a]
    if not out:
        out.append(f"{kind}s in another order: stored {list(a)}, given {list(b)}")
    return out


def differences(stored: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """Each difference between two specs, in words (empty when they are the same study).

    Example:
        >>> differences({"space": {"lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": True}},
        ...              "objectives": [], "constraints": []},
        ...             {"space": {"lr": {"type": "float", "low": 1e-3, "high": 0.1, "log": True}},
        ...              "objectives": [], "constraints": []})
        ["parameter 'lr': stored Float(low=0.0001, high=0.1, log=True), given Float(low=0.001, high=0.1, log=True)"]
    """
    out: list[str] = []
    a, b = stored.get("space"), given.get("space")
    if a != b:
        if not isinstance(a, dict) or not isinstance(b, dict):
            out.append(f"space: stored {json.dumps(a, default=str)}, given "
                       f"{json.dumps(b, default=str)}")
        else:
            for name in a:
                if name not in b:
                    out.append(f"parameter {name!r} only in the stored study")
                elif a[name] != b[name]:
                    out.append(f"parameter {name!r}: stored {_show('parameter', (name, a[name]))}"
                               f", given {_show('parameter', (name, b[name]))}")
            out += [f"parameter {name!r} only in the given space" for name in b if name not in a]
    out += _list_diff("objective", stored.get("objectives"), given.get("objectives"))
    out += _list_diff("constraint", stored.get("constraints") or [], given.get("constraints") or [])
    return out
