"""The progress of ``trawl run``, written as a plugin of the orchestrator.

On a terminal it is a live table (per task: due, running, done, failed, rate, actors) that
logs scroll above; anywhere else it is a log line every few seconds, with the same figures
as structured fields under ``--log-json``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from trawl.cli import output
from trawl.cli.progress import Format, Report, reporter
from trawl.runtime.actor.spec import ActorInfo, QueueInfo
from trawl.runtime.hookspecs import OrchestratorView
from trawl.runtime.plugins import hookimpl

REFRESH = 0.5  # seconds between updates of the live table


@dataclass(frozen=True, kw_only=True, slots=True)
class Line:
    """One task's figures."""

    task: str
    due: int
    due_capped: bool
    running: int
    done: int
    failed: int
    rate: float  # attempts finished per second since the previous update
    actors: int

    def as_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "due": self.due,
            "due_capped": self.due_capped,
            "running": self.running,
            "done": self.done,
            "failed": self.failed,
            "rate": round(self.rate, 2),
            "actors": self.actors,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    """Every task's figures at one tick, and how many actors are alive of how many."""

    lines: list[Line]
    alive: int
    cap: int


class RunProgress:
    """Built-in plugin: reports each task's figures every *every* seconds."""

    def __init__(self, every: float, report: Report[Snapshot]) -> None:
        self.every = every
        self.report = report
        self._last = 0.0
        self._finished: dict[str, tuple[float, int]] = {}  # task -> (when, done + failed)

    @hookimpl
    def trawl_orchestrator_tick(
        self,
        orchestrator: OrchestratorView,
        queues: Mapping[str, QueueInfo],
        actors: Sequence[ActorInfo],
    ) -> None:
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now
        lines = self.lines(orchestrator, queues, actors, now)
        self.report(Snapshot(lines=lines, alive=len(actors), cap=orchestrator.max_actors))

    def lines(
        self,
        orchestrator: OrchestratorView,
        queues: Mapping[str, QueueInfo],
        actors: Sequence[ActorInfo],
        now: float,
    ) -> list[Line]:
        counts = {row.task: row for row in orchestrator.status(max_age=min(self.every, 2.0))}
        alive: dict[str, int] = {}
        for actor in actors:
            alive[actor.type] = alive.get(actor.type, 0) + 1
        out = []
        for name in orchestrator.actor_types:
            row, queue = counts.get(name), queues.get(name)
            finished = (row.done + row.failed) if row else 0
            then, before = self._finished.get(name, (now, finished))
            self._finished[name] = (now, finished)
            out.append(
                Line(
                    task=name,
                    due=queue.depth if queue else 0,
                    due_capped=queue.capped if queue else False,
                    running=row.running if row else 0,
                    done=row.done if row else 0,
                    failed=row.failed if row else 0,
                    rate=(finished - before) / (now - then) if now > then else 0.0,
                    actors=alive.get(name, 0),
                )
            )
        return out


def _due(line: Line) -> str:
    return f"{line.due:,}+" if line.due_capped else f"{line.due:,}"


def _short(line: Line) -> str:
    return (
        f"{line.task} due {_due(line)} running {line.running:,} done {line.done:,} "
        f"failed {line.failed:,} {line.rate:,.1f}/s actors {line.actors}"
    )


def _table(lines: list[Line], alive: int, cap: int) -> Table:
    grid = output.table("task", "due", "running", "done", "failed", "rate/s", "actors")
    grid.caption = f"{alive} of at most {cap} actors alive"
    for column in grid.columns[1:]:
        column.justify = "right"
    for line in lines:
        grid.add_row(
            line.task,
            _due(line),
            f"{line.running:,}",
            f"{line.done:,}",
            f"{line.failed:,}",
            f"{line.rate:,.1f}",
            str(line.actors),
        )
    return grid


RUN: Format[Snapshot] = Format(
    view=lambda snap: _table(snap.lines, snap.alive, snap.cap),
    line=lambda snap: "; ".join(_short(line) for line in snap.lines) or "no tasks",
    fields=lambda snap: {
        "progress": [line.as_json() for line in snap.lines],
        "actors": snap.alive,
    },
)


@contextlib.contextmanager
def progress(enabled: bool, log_every: float, as_json: bool) -> Iterator[RunProgress | None]:
    """The progress plugin for as long as the block runs (``None``: no progress)."""
    with reporter(enabled, log_every, RUN, as_json=as_json) as report:
        if report is None:
            yield None
        else:
            yield RunProgress(REFRESH if report.live else log_every, report)
