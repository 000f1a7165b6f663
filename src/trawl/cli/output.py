"""Printing for commands: JSON documents, tables and times in human and machine forms."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table

from trawl.model.durations import format_seconds


def console(*, stderr: bool = False) -> Console:
    """A console that never reads markup or emoji codes out of user data (ids, messages)."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False)


def table(*columns: str) -> Table:
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in columns:
        grid.add_column(column)
    return grid


def print_table(grid: Table) -> None:
    console().print(grid)


def print_json(value: Any) -> None:
    """One JSON document, indented for people and parseable by programs."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def print_json_line(value: Any) -> None:
    """One compact JSON object on its own line (JSON Lines), flushed at once."""
    click.echo(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def iso(epoch: float | None) -> str | None:
    """ISO-8601 in UTC with a ``Z``, millisecond precision; ``None`` stays ``None``."""
    if epoch is None:
        return None
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stamp(name: str, epoch: float | None) -> dict[str, Any]:
    """A time as JSON: ``{name: ISO string, name_epoch: Unix seconds}`` (both null if unset)."""
    return {name: iso(epoch), f"{name}_epoch": epoch}


def relative(epoch: float | None, now: float | None = None, *, never: str = "-") -> str:
    """``in 5m``, ``3h2m ago``, ``now``; *never* when there is no time."""
    if epoch is None:
        return never
    delta = epoch - (time.time() if now is None else now)
    if abs(delta) < 1:
        return "now"
    if delta > 0:
        return f"in {format_seconds(delta)}"
    return f"{format_seconds(-delta)} ago"


def moment(epoch: float | None, now: float | None = None) -> str:
    """``2024-05-01 12:00:03Z (5m ago)`` for a table or a detail view."""
    if epoch is None:
        return "-"
    when = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return f"{when} ({relative(epoch, now)})"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    return f"{count:,} {noun if count == 1 else (nouns or noun + 's')}"


def first_line(text: str, width: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"
