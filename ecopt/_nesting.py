"""How deep a JSON value may nest in a study's files (one rule for writers and readers).

Python's JSON decoder recurses once per level and raises ``RecursionError``
near the interpreter's recursion limit (1,000), and every later walk over the
value (sanitising, reports, the dashboard) recurses too. A study must stay
readable whatever one line holds, so readers skip a line nested deeper than
:data:`MAX_LINE_DEPTH` (like a torn line), and :meth:`ecopt.Trial.set_user_attr`
refuses a value nested deeper than :data:`MAX_VALUE_DEPTH` before anything is
written. The reader's limit leaves room for the record around a value.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_LINE_DEPTH", "MAX_VALUE_DEPTH", "nesting_depth"]

#: The deepest nesting a user attribute value may have.
MAX_VALUE_DEPTH = 32
#: The deepest nesting a line of a study file may have (a record around a value).
MAX_LINE_DEPTH = 64


def nesting_depth(value: Any, limit: int) -> int:
    """The nesting depth of a JSON-like value, counted without recursion.

    A scalar has depth 0, ``[]`` and ``{}`` depth 1, ``[[1]]`` depth 2.

    Args:
        value: Dicts, lists and tuples of anything.
        limit: Stop counting once the depth exceeds this (the result is then
            ``limit + 1``): a hostile value costs no more than ``limit`` levels.

    Returns:
        The depth, or ``limit + 1`` when it is deeper than ``limit``.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, (list, tuple)):
            children = v
        else:
            continue
        depth += 1
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        stack.extend((c, depth) for c in children)
    return deepest
