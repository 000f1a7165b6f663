"""Durations written as ``30s``, ``5m``, ``7d`` or numbers of seconds."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from trawl.model.errors import InvalidDuration

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")

Duration = str | int | float | timedelta


def seconds(value: Duration) -> float:
    """Return *value* in seconds; ``"1h30m"``, ``90``, ``timedelta(minutes=90)`` all work."""
    if isinstance(value, bool):
        raise InvalidDuration(f"duration must be a number or a string like '7d', got {value!r}")
    if isinstance(value, timedelta):
        result = value.total_seconds()
    elif isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str):
        result = _parse(value)
    else:
        raise InvalidDuration(f"duration must be a number or a string like '7d', got {value!r}")
    if not math.isfinite(result):
        raise InvalidDuration(f"duration must be a finite number of seconds, got {value!r}")
    if result < 0:
        raise InvalidDuration(f"duration must not be negative, got {value!r}")
    return result + 0.0  # -0.0 becomes 0.0


def optional_seconds(value: Duration | None) -> float | None:
    """Like :func:`seconds` but passes ``None`` through."""
    return None if value is None else seconds(value)


def _parse(text: str) -> float:
    compact = text.strip().lower().replace(" ", "")
    try:
        return float(compact)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _PART.finditer(compact):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(compact) or not compact:
        raise InvalidDuration(
            f"cannot parse duration {text!r}: use a number of seconds or units "
            "ms, s, m, h, d, w (for example '90s', '1h30m', '7d')"
        )
    return total


def format_seconds(value: float | None) -> str:
    """Short human form: ``3d4h``, ``12m``, ``45s``."""
    if value is None:
        return "-"
    sign, value = ("-", -value) if value < 0 else ("", value)
    if value < 60:
        return f"{sign}{value:.0f}s" if value >= 1 else f"{sign}{value * 1000:.0f}ms"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        count, value = divmod(value, size)
        if count:
            parts.append(f"{int(count)}{unit}")
    return sign + "".join(parts[:2])
