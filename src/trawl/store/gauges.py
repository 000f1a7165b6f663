"""Whole-database counts for monitoring: a handful of aggregate queries, each one index or
table scan, meant to be read every few seconds at most (the server caches them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trawl.model.records import ConsumerRow, TaskCounts
from trawl.store import reads
from trawl.store.connection import Database
from trawl.store.crawls import FETCH_TASK
from trawl.store.sql import q

_OLDEST_DUE = q("SELECT task, MIN(due_at) FROM jobs WHERE due_at <= :now GROUP BY task")
# Grouped finely enough that each crawl's progress (crawl.operations.tally) comes out of
# the same scan as the whole database's page gauges.
_PAGES = q(
    "SELECT p.crawl_id, p.skip IS NOT NULL AS skipped, j.status, j.due_at IS NULL AS final,"
    " j.waiting, COUNT(*) AS n"
    f" FROM crawl_pages p JOIN jobs j ON j.item_id = p.item_id AND j.task = '{FETCH_TASK}'"
    " GROUP BY p.crawl_id, p.skip IS NOT NULL, j.status, j.due_at IS NULL, j.waiting"
)
_THROTTLED = q(
    "SELECT COUNT(*) FROM crawl_hosts WHERE next_at > :now"
    " OR (blocked_until IS NOT NULL AND blocked_until > :now)"
)
_BLOCKED = q("SELECT COUNT(*) FROM crawl_hosts WHERE blocked_until > :now")


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    tasks: list[TaskCounts]
    oldest_due: dict[str, float]  # task -> due_at of its longest-waiting due job
    pages: dict[str, int] = field(default_factory=dict)  # crawl pages by fetch job state
    hosts_throttled: int = 0  # a request to them must wait (politeness or a block)
    hosts_blocked: int = 0  # held back by a 429/503 or a run of errors
    consumers: list[ConsumerRow] = field(default_factory=list)
    # crawl id -> (job status, due_at is NULL, waiting, count), as CrawlTables.counts has it
    crawls: dict[int, list[tuple[str, bool, str | None, int]]] = field(default_factory=dict)


def snapshot(db: Database, now: float, consumers: list[ConsumerRow]) -> Snapshot:
    tasks = reads.status(db, now)
    with db.read():
        oldest: dict[str, float] = dict(db.execute(_OLDEST_DUE, {"now": now}).tuples().all())
        rows = db.execute(_PAGES).all()
        throttled = db.execute(_THROTTLED, {"now": now}).scalar_one()
        blocked = db.execute(_BLOCKED, {"now": now}).scalar_one()
    pages: dict[str, int] = {}
    crawls: dict[int, list[tuple[str, bool, str | None, int]]] = {}
    for r in rows:
        state = "skipped" if r.skipped else r.status
        pages[state] = pages.get(state, 0) + int(r.n)
        crawls.setdefault(int(r.crawl_id), []).append(
            (r.status, bool(r.final), r.waiting, int(r.n))
        )
    return Snapshot(
        tasks=tasks,
        oldest_due=oldest,
        pages=pages,
        crawls=crawls,
        hosts_throttled=int(throttled),
        hosts_blocked=int(blocked),
        consumers=consumers,
    )
