"""Number and text formatting: the one rule every report, CLI command and progress line uses.

Example:
    >>> from ecopt.fmt import fmt_number
    >>> fmt_number(12345.0), fmt_number(0.123456), fmt_number(float("nan")), fmt_number(None)
    ('12,345', '0.1235', '-', '-')
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["fmt_number", "safe_text", "json_text", "MISSING"]

#: How a missing value (``None`` or NaN) is shown.
MISSING = "-"


def fmt_number(v: Any) -> str:
    """A number as people read it in a table.

    * ``None`` and NaN: ``"-"``; infinities: ``"inf"`` / ``"-inf"``; booleans: ``"True"``;
    * integers, and floats with no fractional part, below 1e15 in magnitude:
      thousands separators (``12345.0`` -> ``"12,345"``);
    * other floats of magnitude 1e3 to 1e15: rounded to a whole number with
      separators (``1036.4`` -> ``"1,036"``, ``12345.6`` -> ``"12,346"``), so a
      column of such numbers reads alike;
    * everything else: four significant digits (``0.1235``, ``1.5e-05``, ``2.3e+16``).

    Anything that is not a number is returned as ``str(v)``.
    """
    if v is None:
        return MISSING
    if isinstance(v, bool):
        return str(v)
    if hasattr(v, "item") and not isinstance(v, (int, float)):
        try:
            v = v.item()  # numpy / torch scalars
        except (TypeError, ValueError):
            return str(v)
    if isinstance(v, int):
        return f"{v:,}" if abs(v) < 10**15 else f"{v:.4g}"
    if not isinstance(v, float):
        return str(v)
    if math.isnan(v):
        return MISSING
    if v == 0:
        return "0"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if abs(v) < 1e15 and (v.is_integer() or abs(v) >= 1e3):
        return f"{v:,.0f}"
    return f"{v:.4g}"


# C0/C1 control characters (ANSI escapes...) and the bidirectional controls (U+202E...)
# that would reorder what a terminal or a page title shows.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe_text(text: object) -> str:
    """Text from a study directory made safe to show: controls written as escapes.

    Control characters become ``\\xNN`` and bidirectional controls ``\\uNNNN``,
    so a crafted study name or message can neither drive a terminal nor reverse
    a report's title.

    Example:
        >>> print(safe_text("abc\\u202egnp.exe"))
        abc\\u202egnp.exe
    """
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                       else f"\\u{ord(m.group()):04x}", str(text))


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def json_text(obj: Any) -> str:
    """``obj`` as the JSON a command's ``--json`` prints: indented, strict JSON.

    NaN and infinities (not JSON) become ``null``; other values JSON cannot hold
    (paths, dates) are written as their text.

    Example:
        >>> json_text({"hv": float("nan"), "n": 3})
        '{\n  "hv": null,\n  "n": 3\n}'
    """
    import json

    return json.dumps(_json_safe(obj), indent=2, default=str, allow_nan=False)
