"""Named type aliases used across ecopt (one place, as STYLE.md asks)."""

from __future__ import annotations

from typing import Union

#: A parameter value: what a search-space dimension can hold.
ParamValue = Union[float, int, str, bool]
#: One configuration: parameter name -> value.
Params = dict[str, ParamValue]
