"""Workloads for acceptance tests: a user's app file, its items, and what the database says
afterwards (journal rows, job rows, the runs a task logged)."""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from trawl.model.records import JournalEntry, NewItem
from trawl.runtime.loader import load_app
from trawl.store.store import Store

# Prepended to every app: how a task records that it ran. One os.write per line on an
# O_APPEND descriptor, so lines from concurrent processes never interleave.
APP_PRELUDE = """
import asyncio
import os
import random
import time
from pathlib import Path

import trawl

HERE = Path(__file__).parent
app = trawl.App()


def record(*fields: object) -> None:
    line = " ".join(str(f) for f in fields) + "\\n"
    fd = os.open(HERE / "runs.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
"""


def write_app(directory: Path, tasks: str) -> str:
    """Write an app file declaring *tasks* (after :data:`APP_PRELUDE`); returns its APP spec."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "app.py"
    path.write_text(APP_PRELUDE + textwrap.dedent(tasks))
    return f"{path}:app"


def seed(url: str, app: str, ids: Iterable[str], *, niceness: dict[str, int] | None = None) -> None:
    """Register *app*'s tasks and add items tagged ``t`` (what a user's first run does)."""
    niceness = niceness or {}
    items = [NewItem(id=i, tags=(("t", None),), niceness=niceness.get(i)) for i in ids]
    with Store(url) as store:
        store.register_tasks(d.info() for d in load_app(app).tasks.values())
        store.add_items(items)


def journal(url: str) -> list[JournalEntry]:
    """Every journal row, oldest first."""
    entries: list[JournalEntry] = []
    with Store(url) as store:
        while batch := store.journal(entries[-1].seq if entries else 0, 5000):
            entries += batch
    return entries


def kinds_by_item(entries: Iterable[JournalEntry], kind: str) -> Counter[str]:
    """How many journal rows of *kind* each item has."""
    return Counter(e.item_id for e in entries if e.kind == kind and e.item_id is not None)


@dataclass(frozen=True, slots=True)
class JobRow:
    status: str
    attempt: int
    due_at: float | None
    owner: str | None


def jobs(url: str) -> dict[str, JobRow]:
    """Item id -> its one job (these apps have one task)."""
    stmt = sa.text("SELECT item_id, status, attempt, due_at, owner FROM jobs")
    with Store(url) as store:
        rows = store.db.execute(stmt).all()
    return {r.item_id: JobRow(r.status, r.attempt, r.due_at, r.owner) for r in rows}


def done_count(url: str) -> int:
    with Store(url) as store:
        return sum(c.done for c in store.status())


@dataclass(frozen=True, slots=True)
class Run:
    """One line a task recorded: ``item pid attempt start end``."""

    item: str
    pid: int
    attempt: int
    start: float
    end: float


def runs(directory: Path) -> list[Run]:
    path = directory / "runs.log"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        item, pid, attempt, start, end = line.split()
        out.append(Run(item, int(pid), int(attempt), float(start), float(end)))
    return out
