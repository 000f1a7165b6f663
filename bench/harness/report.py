"""The printed table and ``results/latest.json`` (a list of rows) with its ``latest-meta.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.rows import Row

RESULTS = Path(__file__).resolve().parent.parent / "results"

_HEADERS = (
    "workload",
    "backend",
    "system",
    "variant",
    "median",
    "min",
    "max",
    "unit",
    "ratio",
    "vs best peer",
)


def table(rows: list[Row]) -> str:
    """One aligned text table; ``ratio`` is the median over the baseline's median."""
    lines = [_HEADERS] + [_cells(row, rows) for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(_HEADERS))]
    numeric = {"median", "min", "max"}

    def fmt(line: tuple[str, ...]) -> str:
        return "  ".join(
            cell.rjust(w) if h in numeric else cell.ljust(w)
            for cell, w, h in zip(line, widths, _HEADERS, strict=True)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(lines[0]), rule, *(fmt(line) for line in lines[1:])])


def _cells(row: Row, rows: list[Row]) -> tuple[str, ...]:
    return (
        row.workload,
        row.backend,
        row.system,
        row.variant,
        _number(row.median),
        _number(min(row.runs)),
        _number(max(row.runs)),
        row.unit,
        _ratio(row, rows),
        "" if row.ratio_to_best_peer is None else f"{row.ratio_to_best_peer:.2f}x",
    )


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _ratio(row: Row, rows: list[Row]) -> str:
    if row.ratio is None:
        return ""
    base = next((r for r in rows if r.key() == row.baseline), None)
    if base is None:
        return f"{row.ratio:.2f}x {row.baseline}"
    return f"{row.ratio:.2f}x {base.system if base.system != row.system else base.variant}"


def write(rows: list[Row], meta: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    latest = RESULTS / "latest.json"
    latest.write_text(json.dumps([r.as_json() for r in rows], indent=1) + "\n")
    (RESULTS / "latest-meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return latest
