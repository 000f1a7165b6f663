"""A terminal chart: one sparkline per series, on a shared scale."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

BLOCKS = "▁▂▃▄▅▆▇█"


def sparklines(series: Mapping[str, Sequence[float]], fmt: str = "{:.2f}") -> list[str]:
    """A line per series, ``name  ▁▃▅█  low..high``, every series scaled alike."""
    values = [v for row in series.values() for v in row]
    if not values:
        return []
    low, high = min(values), max(values)
    width = max(len(name) for name in series)
    return [
        f"{name:<{width}}  {_line(row, low, high)}  {fmt.format(min(row))}..{fmt.format(max(row))}"
        for name, row in series.items()
    ]


def _line(row: Sequence[float], low: float, high: float) -> str:
    if high == low:
        return BLOCKS[len(BLOCKS) // 2] * len(row)
    scale = (len(BLOCKS) - 1) / (high - low)
    return "".join(BLOCKS[round((v - low) * scale)] for v in row)
