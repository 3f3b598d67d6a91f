"""Named type aliases used across ecopt (one place, as STYLE.md asks), and the number check."""

from __future__ import annotations

import math
from typing import Union

#: A parameter value: what a search-space dimension can hold.
ParamValue = Union[float, int, str, bool]
#: One configuration: parameter name -> value.
Params = dict[str, ParamValue]


def is_finite_number(value: object) -> bool:
    """Whether ``value`` is a finite real number (``bool`` is not one).

    Unlike ``math.isfinite``, an int too large for a float (``10**400``) is
    ``False`` rather than an ``OverflowError``, so callers can refuse it with
    the same ``ValueError`` as ``inf``.
    """
    if isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)  # type: ignore[arg-type]
    except (OverflowError, TypeError):
        return False
