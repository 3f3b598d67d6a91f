"""Search spaces: the dimensions a study searches, their validation and unit-cube encoding.

Every dimension maps to the unit interval so samplers see ``[0, 1]^d``:

* ``Float``: linear or log scale.
* ``Int``: the same, rounded to the nearest allowed value (``step``) on decoding.
* ``Categorical``: one dimension holding the category's bin centre
  ``(i + 0.5) / n``; unordered categories are flagged so model-based samplers
  treat them as categorical (not as a continuous axis). Ordered categories are
  an ordinal axis.
* ``Fixed``: no dimension at all; the value is added back on decoding.

Example:
    >>> import ecopt
    >>> space = ecopt.SearchSpace({
    ...     "lr": ecopt.Float(1e-4, 1e-1, log=True),
    ...     "batch_size": ecopt.Int(8, 1024, log=True),
    ...     "backend": ecopt.Categorical(["pandas", "polars", "dask"]),
    ...     "epochs": ecopt.Fixed(3),
    ... })
    >>> space.dim
    3
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecopt._types import Params, ParamValue, is_finite_number

__all__ = [
    "Parameter",
    "Float",
    "Int",
    "Categorical",
    "Fixed",
    "SearchSpace",
    "parameter_from_dict",
]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_json_value(value: object, what: str) -> None:
    if not isinstance(value, (str, int, float, bool)):
        raise ValueError(
            f"{what} must be a str, int, float or bool (JSON-able), got {value!r} "
            f"of type {type(value).__name__}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} must be finite to be stored as JSON, got {value!r}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:  # pragma: no cover - guarded above
        raise ValueError(f"{what} must be JSON-able, got {value!r}") from exc


class Parameter(ABC):
    """One dimension of a search space."""

    #: How many unit-cube columns this parameter takes (0 for ``Fixed``).
    n_dims: int = 1

    @abstractmethod
    def validate(self, value: object, name: str = "value") -> ParamValue:
        """Check that ``value`` is allowed and return it in canonical form.

        Raises:
            ValueError: naming the rule broken and the value given.
        """

    @abstractmethod
    def encode(self, value: ParamValue) -> float:
        """Map a valid value to ``[0, 1]``."""

    @abstractmethod
    def decode(self, u: float) -> ParamValue:
        """Map a unit-interval coordinate back to a valid value."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """A JSON-able description (what ``study.json`` stores)."""

    def grid(self, n_points: int) -> list[ParamValue]:
        """Up to ``n_points`` evenly spaced values (all values for discrete kinds)."""
        us = [0.5] if n_points == 1 else [i / (n_points - 1) for i in range(n_points)]
        out: list[ParamValue] = []
        for u in us:
            v = self.decode(u)
            if v not in out:
                out.append(v)
        return out


@dataclass(frozen=True)
class Float(Parameter):
    """A real-valued dimension on ``[low, high]``.

    Args:
        low: Lower bound (inclusive).
        high: Upper bound (inclusive); ``low < high`` must hold.
        log: Search on a log scale (both bounds must then be ``> 0``).

    Example:
        >>> ecopt.Float(1e-4, 1e-1, log=True)
    """

    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        if not _is_number(self.low) or not _is_number(self.high):
            raise ValueError(
                f"Float bounds must be numbers, got low={self.low!r}, high={self.high!r}"
            )
        if not (is_finite_number(self.low) and is_finite_number(self.high)):
            raise ValueError(
                f"Float bounds must be finite, got low={self.low}, high={self.high}"
            )
        if not self.low < self.high:
            raise ValueError(
                f"low < high must hold, got low={self.low}, high={self.high}"
            )
        if self.log and self.low <= 0:
            raise ValueError(
                f"a log-scale dimension needs low > 0, got low={self.low}"
            )
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))

    def validate(self, value: object, name: str = "value") -> float:
        if not _is_number(value):
            raise ValueError(f"{name} must be a number, got {value!r}")
        v = float(value)  # type: ignore[arg-type]
        if not (self.low <= v <= self.high):
            raise ValueError(
                f"{name} must lie in [{self.low}, {self.high}], got {v}"
            )
        return v

    def encode(self, value: ParamValue) -> float:
        v = float(value)
        if self.log:
            return (math.log(v) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (v - self.low) / (self.high - self.low)

    def decode(self, u: float) -> float:
        u = min(1.0, max(0.0, float(u)))
        if self.log:
            v = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            v = self.low + u * (self.high - self.low)
        return min(self.high, max(self.low, v))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "float", "low": self.low, "high": self.high, "log": self.log}


@dataclass(frozen=True)
class Int(Parameter):
    """An integer dimension on ``[low, high]`` with an optional ``step``.

    Args:
        low: Lower bound (inclusive).
        high: Upper bound (inclusive); ``low < high`` must hold.
        log: Search on a log scale (``low >= 1`` then).
        step: Allowed values are ``low, low + step, ...`` (not with ``log``).

    Example:
        >>> ecopt.Int(8, 1024, log=True)
    """

    low: int
    high: int
    log: bool = False
    step: int = 1

    def __post_init__(self) -> None:
        for what, v in (("low", self.low), ("high", self.high), ("step", self.step)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise ValueError(f"Int {what} must be an integer, got {what}={v!r}")
        if not self.low < self.high:
            raise ValueError(
                f"low < high must hold, got low={self.low}, high={self.high}"
            )
        for what, v in (("low", self.low), ("high", self.high)):
            if abs(int(v)) > 2**53:  # the unit-cube encoding is float64: larger ints round
                raise ValueError(f"|{what}| <= 2**53 must hold (integers beyond it lose "
                                 f"precision in the sampler's float64 encoding), got {what}={v}")
        if self.step < 1:
            raise ValueError(f"step >= 1 must hold, got step={self.step}")
        if self.log and self.low <= 0:
            raise ValueError(f"a log-scale dimension needs low > 0, got low={self.low}")
        if self.log and self.step != 1:
            raise ValueError(
                f"log=True and step != 1 cannot be combined, got step={self.step}"
            )

    @property
    def values(self) -> range:
        """Every allowed value, in order."""
        return range(self.low, self.high + 1, self.step)

    def validate(self, value: object, name: str = "value") -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer, float)):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{name} must be an integer, got {value!r}")
        v = int(value)
        if not (self.low <= v <= self.high):
            raise ValueError(f"{name} must lie in [{self.low}, {self.high}], got {v}")
        if (v - self.low) % self.step:
            raise ValueError(
                f"{name} must be low + k * step (low={self.low}, step={self.step}), got {v}"
            )
        return v

    def _span(self) -> tuple[float, float]:
        if self.log:
            return math.log(self.low), math.log(self.high)
        return float(self.low), float(self.high)

    def encode(self, value: ParamValue) -> float:
        lo, hi = self._span()
        v = math.log(float(value)) if self.log else float(value)
        return (v - lo) / (hi - lo)

    def decode(self, u: float) -> int:
        u = min(1.0, max(0.0, float(u)))
        lo, hi = self._span()
        x = lo + u * (hi - lo)
        if self.log:
            # Round in log space to the nearer of the two neighbouring integers.
            below = max(self.low, math.floor(math.exp(x)))
            above = min(self.high, below + 1)
            v = below if abs(math.log(below) - x) <= abs(math.log(above) - x) else above
            return int(v)
        k = round((x - self.low) / self.step)
        return int(min(self.high, max(self.low, self.low + k * self.step)))

    def grid(self, n_points: int) -> list[ParamValue]:
        if len(self.values) <= n_points:
            return list(self.values)
        return super().grid(n_points)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "int", "low": int(self.low), "high": int(self.high),
                "log": self.log, "step": int(self.step)}


@dataclass(frozen=True)
class Categorical(Parameter):
    """A choice among a finite list of values.

    Args:
        choices: Distinct str/int/float/bool values (at least one).
        ordered: ``True`` when the order of ``choices`` means something (e.g.
            sizes); samplers then treat it as an ordinal axis.

    Example:
        >>> ecopt.Categorical(["pandas", "polars", "dask"])
    """

    choices: tuple[ParamValue, ...]
    ordered: bool = False

    def __init__(self, choices: Sequence[ParamValue], ordered: bool = False) -> None:
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
            raise ValueError(
                f"choices must be a list of values, got {choices!r}"
            )
        if len(choices) == 0:
            raise ValueError("choices must not be empty, got []")
        seen: list[tuple[type, ParamValue]] = []
        for i, c in enumerate(choices):
            _check_json_value(c, f"choices[{i}]")
            if isinstance(c, str) and c == "":
                raise ValueError(f"choices must not contain an empty string, got choices[{i}]=''")
            key = (type(c), c)
            if key in seen:
                raise ValueError(f"choices must be distinct, got duplicate {c!r}")
            seen.append(key)
        object.__setattr__(self, "choices", tuple(choices))
        object.__setattr__(self, "ordered", bool(ordered))

    def _index(self, value: object) -> int:
        for i, c in enumerate(self.choices):
            if type(c) is type(value) and c == value:
                return i
        # Accept ints for float choices and vice versa when they compare equal
        # (JSON round trips turn 1.0 into 1.0 but users may pass 1).
        for i, c in enumerate(self.choices):
            if _is_number(c) and _is_number(value) and c == value:
                return i
        raise ValueError(f"value must be one of {list(self.choices)!r}, got {value!r}")

    def validate(self, value: object, name: str = "value") -> ParamValue:
        try:
            return self.choices[self._index(value)]
        except ValueError:
            raise ValueError(
                f"{name} must be one of {list(self.choices)!r}, got {value!r}"
            ) from None

    def encode(self, value: ParamValue) -> float:
        return (self._index(value) + 0.5) / len(self.choices)

    def decode(self, u: float) -> ParamValue:
        i = int(math.floor(min(1.0, max(0.0, float(u))) * len(self.choices)))
        return self.choices[min(i, len(self.choices) - 1)]

    def index_of(self, value: ParamValue) -> int:
        """Position of ``value`` in ``choices``."""
        return self._index(value)

    def grid(self, n_points: int) -> list[ParamValue]:
        return list(self.choices)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "categorical", "choices": list(self.choices), "ordered": self.ordered}


@dataclass(frozen=True)
class Fixed(Parameter):
    """A constant passed to every trial (recorded, never searched).

    Example:
        >>> ecopt.Fixed(3)
    """

    value: ParamValue
    n_dims: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_json_value(self.value, "Fixed value")

    def validate(self, value: object, name: str = "value") -> ParamValue:
        if value != self.value or type(value) is not type(self.value):
            if not (_is_number(value) and _is_number(self.value) and value == self.value):
                raise ValueError(f"{name} is fixed to {self.value!r}, got {value!r}")
        return self.value

    def encode(self, value: ParamValue) -> float:  # pragma: no cover - never a column
        raise TypeError("Fixed parameters take no unit-cube column")

    def decode(self, u: float) -> ParamValue:
        return self.value

    def grid(self, n_points: int) -> list[ParamValue]:
        return [self.value]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "fixed", "value": self.value}


def parameter_from_dict(data: Mapping[str, Any]) -> Parameter:
    """Rebuild a parameter from :meth:`Parameter.to_dict` output (plain JSON only)."""
    kind = data.get("type")
    if kind == "float":
        return Float(float(data["low"]), float(data["high"]), log=bool(data.get("log", False)))
    if kind == "int":
        return Int(int(data["low"]), int(data["high"]), log=bool(data.get("log", False)),
                   step=int(data.get("step", 1)))
    if kind == "categorical":
        return Categorical(list(data["choices"]), ordered=bool(data.get("ordered", False)))
    if kind == "fixed":
        return Fixed(data["value"])
    raise ValueError(f"unknown parameter type {kind!r} in {dict(data)!r}")


class SearchSpace(Mapping[str, Parameter]):
    """An ordered mapping of parameter names to dimensions.

    Args:
        params: Name -> :class:`Parameter`. Names are non-empty strings.

    Raises:
        ValueError: for an empty space, a bad name or a value that is not a Parameter.

    Example:
        >>> space = ecopt.SearchSpace({"lr": ecopt.Float(1e-3, 1e-1, log=True)})
        >>> x = space.encode({"lr": 0.01})   # shape (1,), in [0, 1]
        >>> space.decode(x)
        {'lr': 0.01...}
    """

    def __init__(self, params: Mapping[str, Parameter]) -> None:
        if not isinstance(params, Mapping):
            raise ValueError(f"a SearchSpace takes a dict of name -> Parameter, got {params!r}")
        if len(params) == 0:
            raise ValueError("a search space needs at least one parameter, got {}")
        for name, p in params.items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"parameter names must be non-empty strings, got {name!r}")
            if not isinstance(p, Parameter):
                raise ValueError(
                    f"parameter {name!r} must be a Float, Int, Categorical or Fixed, got {p!r}"
                )
        self._params: dict[str, Parameter] = dict(params)
        self._searched = [n for n, p in self._params.items() if p.n_dims]

    # Mapping protocol
    def __getitem__(self, key: str) -> Parameter:
        return self._params[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __repr__(self) -> str:
        return f"SearchSpace({self._params!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SearchSpace) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @property
    def searched_names(self) -> list[str]:
        """Names of the parameters that take a unit-cube column, in column order."""
        return list(self._searched)

    @property
    def dim(self) -> int:
        """Number of unit-cube columns ``d``."""
        return len(self._searched)

    @property
    def categorical_columns(self) -> dict[int, int]:
        """Column index -> number of categories, for unordered categoricals."""
        return {
            i: len(p.choices)  # type: ignore[attr-defined]
            for i, n in enumerate(self._searched)
            if isinstance(p := self._params[n], Categorical) and not p.ordered
        }

    def validate(self, params: Mapping[str, object]) -> Params:
        """Check a full configuration and return it in canonical form.

        Raises:
            ValueError: for unknown names, missing names or values out of range.
        """
        unknown = sorted(set(params) - set(self._params))
        if unknown:
            raise ValueError(
                f"unknown parameter name(s) {unknown}; the space has {list(self._params)}"
            )
        missing = [n for n in self._params if n not in params]
        if missing:
            raise ValueError(f"missing parameter(s) {missing}")
        return {n: p.validate(params[n], name=n) for n, p in self._params.items()}

    def encode(self, params: Mapping[str, ParamValue]) -> np.ndarray:
        """Map a configuration to the unit cube.

        Returns:
            A ``(d,)`` float64 array in ``[0, 1]``.
        """
        return np.array([self._params[n].encode(params[n]) for n in self._searched], dtype=float)

    def decode(self, x: Sequence[float] | np.ndarray) -> Params:
        """Map a ``(d,)`` unit-cube point to a configuration (Fixed values added back)."""
        x = np.asarray(x, dtype=float).reshape(-1)
        if x.shape[0] != self.dim:
            raise ValueError(f"expected a point with {self.dim} coordinates, got {x.shape[0]}")
        cols = dict(zip(self._searched, x))
        return {n: p.decode(cols[n]) if p.n_dims else p.decode(0.0) for n, p in self._params.items()}

    def grid(self, n_points: int = 5, values: Mapping[str, Sequence[ParamValue]] | None = None
             ) -> list[Params]:
        """The full grid: ``values`` where given, else ``n_points`` per continuous axis."""
        values = dict(values or {})
        unknown = sorted(set(values) - set(self._params))
        if unknown:
            raise ValueError(f"unknown parameter name(s) in grid values: {unknown}")
        axes: list[list[ParamValue]] = []
        for n, p in self._params.items():
            if n in values:
                vs = list(values[n])
                if not vs:
                    raise ValueError(f"grid values for {n!r} must not be empty")
                axes.append([p.validate(v, name=n) for v in vs])
            else:
                axes.append(p.grid(n_points))
        names = list(self._params)
        out: list[Params] = [{}]
        for n, axis in zip(names, axes):
            out = [{**row, n: v} for row in out for v in axis]
        return out

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """JSON-able description, in order."""
        return {n: p.to_dict() for n, p in self._params.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, Any]]) -> SearchSpace:
        """Rebuild from :meth:`to_dict` output."""
        return cls({n: parameter_from_dict(d) for n, d in data.items()})
