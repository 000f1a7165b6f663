"""How crawls look on screen and in JSON: the live display, tables, summaries."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from rich.text import Text

from trawl.cli import output
from trawl.cli.progress import Format
from trawl.cli.progress import configure_logging as _configure_logging
from trawl.crawl.operations import Progress

log = logging.getLogger("trawl.crawl")

LOG_EVERY = 5.0


def configure_logging() -> None:
    _configure_logging("warning")


class Rate:
    """Pages finished per second over the last ten seconds."""

    def __init__(self) -> None:
        self.points: deque[tuple[float, int]] = deque()

    def __call__(self, p: Progress) -> float:
        finished = p.done + p.failed
        self.points.append((p.at, finished))
        while len(self.points) > 2 and p.at - self.points[0][0] > 10:
            self.points.popleft()
        first_at, first = self.points[0]
        return (finished - first) / (p.at - first_at) if p.at > first_at else 0.0


def line(p: Progress, rate: float) -> str:
    limit = "unlimited" if p.crawl.depth_limit is None else str(p.crawl.depth_limit)
    frontier = "-" if p.frontier is None else str(p.frontier)
    text = (
        f"crawl {p.crawl.id} {p.status}  done {p.done:,}  queued {p.ready:,}  "
        f"fetching {p.claimed}  failed {p.failed:,}  skipped {p.skipped:,}  "
        f"{rate:,.1f} pages/s  {_size(p.bytes)}  depth {frontier}/{limit}"
    )
    if p.busy:
        text += "  busiest: " + ", ".join(f"{h} ({n})" for h, n in p.busy)
    return text


def live_format() -> Format[Progress]:
    """The crawl's progress line, with its page rate over the last ten seconds."""
    rate = Rate()
    return Format(view=lambda p: Text(line(p, rate(p))), line=lambda p: line(p, rate(p)))


def summary(p: Progress) -> str:
    elapsed = max(1e-9, p.at - p.crawl.created_at)
    return (
        f"crawl {p.crawl.id} {p.status}: {p.done:,} pages done, {p.failed:,} failed, "
        f"{p.skipped:,} skipped, {p.ready + p.claimed + p.parked:,} left; "
        f"{p.responses:,} responses, {_size(p.bytes)} in {elapsed:,.1f}s since it started"
    )


def brief_json(p: Progress) -> dict[str, Any]:
    return {
        "id": p.crawl.id,
        "status": p.status,
        "seeds": p.crawl.seeds,
        "depth_limit": p.crawl.depth_limit,
        "pages": {
            "ready": p.ready,
            "claimed": p.claimed,
            "done": p.done,
            "failed": p.failed,
            "skipped": p.skipped,
            "parked": p.parked,
        },
        **output.stamp("created_at", p.crawl.created_at),
    }


def full_json(p: Progress, rules: list[dict[str, Any]]) -> dict[str, Any]:
    c = p.crawl
    return brief_json(p) | {
        "concurrency": c.concurrency,
        "niceness": c.niceness,
        "ruleset": c.ruleset,
        "rules": rules,
        "options": c.options,
        "frontier": p.frontier,
        "bytes": p.bytes,
        "responses": p.responses,
        "note": c.note,
        "tag": c.tag,
    }


def list_table(rows: list[Progress]) -> Any:
    grid = output.table("id", "status", "done", "queued", "failed", "skipped", "seeds")
    for p in rows:
        grid.add_row(
            str(p.crawl.id),
            p.status,
            f"{p.done:,}",
            f"{p.ready + p.claimed:,}",
            f"{p.failed:,}",
            f"{p.skipped:,}",
            " ".join(p.crawl.seeds),
        )
    return grid


def detail(p: Progress, version: int, rules: list[dict[str, Any]]) -> str:
    c = p.crawl
    limit = "unlimited" if c.depth_limit is None else str(c.depth_limit)
    lines = [
        f"crawl {c.id}  {p.status}",
        f"seeds        {' '.join(c.seeds)}",
        f"depth limit  {limit}   frontier {p.frontier if p.frontier is not None else '-'}",
        f"pages        done {p.done:,}  queued {p.ready:,}  fetching {p.claimed}  "
        f"failed {p.failed:,}  skipped {p.skipped:,}  set aside {p.parked:,}",
        f"fetched      {p.responses:,} responses, {_size(p.bytes)}",
        f"concurrency  {c.concurrency}   niceness {c.niceness}",
        f"options      {output.compact_json(c.options)}",
        f"created      {output.moment(c.created_at)}",
        f"ruleset      version {version}",
    ]
    lines += [
        f"  {n:3}  {r['kind']:<10} {r['value']!r}  {r['match']}" for n, r in enumerate(rules, 1)
    ]
    return "\n".join(lines)


def page_json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "url": row["url"],
        "depth": row["depth"],
        "via": row["via"],
        "state": _state(row["status"], row["due_at"]),
        "skip": row["skip"],
        "attempts": row["attempt"],
    }


def _state(status: str, due_at: float | None) -> str:
    if status == "running":
        return "CLAIMED"
    if status in ("done", "skipped"):
        return status.upper()
    if due_at is not None:
        return "READY"
    return "FAILED" if status == "failed" else "STASHED"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:,.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1000
    return f"{value:.1f} GB"
