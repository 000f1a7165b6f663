"""``journal commits``: how many journaled transactions a PostgreSQL primary commits, all
writers together (PostgreSQL only: SQLite has one writer).

Every trawl transaction that changes something writes journal rows, and a fleet of workers
shares one primary, so this rate bounds a fleet's commits. Several processes (the plan's
``journal_connections``) each commit transactions of one journal row, as fast as they can,
for ``journal_seconds``:

- ``trawl``: through ``Database.write()`` and its journal, as trawl's writers do (the
  journal's advisory lock taken *shared*, the insert, ``pg_notify``, COMMIT);
- ``raw-sql``, ``no lock``: the same statements with the driver alone and no lock: what the
  server and the disk allow (the baseline);
- ``raw-sql``, ``exclusive lock``: the same with the lock taken *exclusively*, as trawl did
  before 2026-11-26: one COMMIT at a time across all writers, their WAL flushes one by one.

The three run in rounds (ABC, then CBA), so a slow minute of the machine falls on all.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg
import sqlalchemy as sa

from harness import trawl_db
from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row, set_ratio
from trawl.store.connection import JOURNAL_LOCK

WORKLOAD = "journal commits"
_INSERT = (
    "INSERT INTO journal (at, kind, item_id, task, detail) VALUES (%s, 'bench', NULL, NULL, NULL)"
)
_NOTIFY = "SELECT pg_notify('trawl_journal', '')"
_EXCLUSIVE = f"SELECT pg_advisory_xact_lock({JOURNAL_LOCK})"
VARIANTS = ("trawl", "no lock", "exclusive lock")


def run(plan: Plan, backend: Backend) -> list[Row]:
    if backend.dialect != "postgresql":
        return []
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with backend.database("journal") as url:
        trawl_db.prepare(url)
        for i in range(plan.runs):
            for variant in VARIANTS[::-1] if i % 2 else VARIANTS:
                rates[variant].append(_measure(plan, url, variant))
            say(
                f"  round {i + 1}: "
                + "; ".join(f"{v} {r[-1]:,.0f} commits/s" for v, r in rates.items())
            )
    params = {"connections": plan.journal_connections, "seconds": plan.journal_seconds}
    rows = {
        variant: Row(
            system="trawl" if variant == "trawl" else "raw-sql",
            backend=backend.name,
            workload=WORKLOAD,
            variant=f"{plan.journal_connections} connections"
            + ("" if variant == "trawl" else f", {variant}"),
            unit="commits/s",
            better="higher",
            runs=rates[variant],
            params=params,
        )
        for variant in VARIANTS
    }
    set_ratio(rows["trawl"], rows["no lock"])
    set_ratio(rows["exclusive lock"], rows["no lock"])
    base = statistics.median(rates["no lock"])
    say(
        f"  over no lock: trawl {statistics.median(rates['trawl']) / base:.2f}x,"
        f" exclusive lock {statistics.median(rates['exclusive lock']) / base:.2f}x"
    )
    return [rows["no lock"], rows["trawl"], rows["exclusive lock"]]


def _measure(plan: Plan, url: str, variant: str) -> float:
    """Commits per second of all the writers together: each runs for the same span, from
    when every one of them has connected."""
    context = multiprocessing.get_context("spawn")
    ready: Any = context.Queue()
    counts: Any = context.Queue()
    go = context.Event()
    seconds = plan.journal_seconds
    procs = [
        context.Process(target=_writer, args=(url, variant, seconds, ready, go, counts))
        for _ in range(plan.journal_connections)
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            ready.get(timeout=120)
        go.set()
        total = sum(counts.get(timeout=120 + seconds) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()
    return float(total) / seconds


def _writer(url: str, variant: str, seconds: float, ready: Any, go: Any, counts: Any) -> None:
    commit = _trawl(url) if variant == "trawl" else _raw(url, variant == "exclusive lock")
    ready.put(True)
    go.wait()
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        commit()
        n += 1
    counts.put(n)


def _trawl(url: str) -> Callable[[], None]:
    from trawl.store.connection import Database

    db = Database(url)
    row = {"at": time.time(), "kind": "bench", "item_id": None, "task": None, "detail": None}

    def commit() -> None:
        with db.write():
            db.journal([row])

    return commit


def _raw(url: str, exclusive: bool) -> Callable[[], None]:
    dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = psycopg.connect(dsn)

    def commit() -> None:  # one round trip, as trawl's: a pipeline, synced at COMMIT
        with conn.pipeline(), conn.transaction():
            if exclusive:
                conn.execute(_EXCLUSIVE)
            conn.execute(_INSERT, [time.time()])
            conn.execute(_NOTIFY)

    return commit
