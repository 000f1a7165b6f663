"""Jobs handed to an external executor (Celery): what a feeder and the executor's workers
write, and what ``trawl status`` reads.

A handed-off job is ``running`` the whole time, leased and fenced like any other; its
``handoff`` column says where it is: ``claimed`` (a feeder leased it and may or may not
have published it yet), ``queued`` (published to the broker, recorded), ``started`` (an
executor's worker took it and runs it). Each step is a compare-and-swap on the job's
attempt, so a message delivered twice runs once, and a stale one changes nothing.

Feeders lease the queue they fill (``feeders``), so two feeders never fill one queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trawl.store import codec
from trawl.store.claim import CLAIMED_POSTGRES, CLAIMED_SQLITE
from trawl.store.connection import Database
from trawl.store.sql import q

CLAIMED = "claimed"
QUEUED = "queued"
STARTED = "started"


def _ids(db: Database, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    if db.is_sqlite:
        return "IN (SELECT value FROM json_each(:ids))", {"ids": codec.dumps(list(values))}
    return "= ANY(:ids)", {"ids": list(values)}


_FENCE = "id = :id AND attempt = :attempt AND status = 'running'"
_RECORD = q(
    f"UPDATE jobs SET handoff = 'queued', due_at = :until WHERE {_FENCE} AND handoff = 'claimed'"
)
_START_SQLITE = q(
    f"""
    UPDATE jobs SET handoff = 'started', owner = :owner, due_at = :now + :lease, ready = false
    WHERE {_FENCE} AND handoff IN ('claimed', 'queued')
    RETURNING {CLAIMED_SQLITE}
    """
)
_START_POSTGRES = q(
    f"""
    UPDATE jobs SET handoff = 'started', owner = :owner, due_at = :now + :lease, ready = false
    FROM items WHERE items.id = jobs.item_id
      AND jobs.id = :id AND jobs.attempt = :attempt AND jobs.status = 'running'
      AND jobs.handoff IN ('claimed', 'queued')
    RETURNING {CLAIMED_POSTGRES}
    """
)
_COUNTS = q(
    "SELECT task, handoff, count(*) FROM jobs WHERE status = 'running' AND handoff IS NOT NULL"
    " GROUP BY task, handoff"
)
_EXECUTORS = q("SELECT name, executor, queue FROM tasks WHERE executor <> 'local' ORDER BY name")

# The feeder's lease on its queue: taken when free, lapsed, or already its own.
_TAKE_QUEUE = q(
    """
    INSERT INTO feeders (queue, executor, owner, until, cap)
    VALUES (:queue, :executor, :owner, :until, :cap)
    ON CONFLICT (queue) DO UPDATE SET executor = excluded.executor, owner = excluded.owner,
        until = excluded.until, cap = excluded.cap
    WHERE feeders.owner = excluded.owner OR feeders.until <= :now
    """
)
_QUEUE_HOLDER = q("SELECT owner, until FROM feeders WHERE queue = :queue")
_SAW = q(
    "UPDATE feeders SET broker_length = :length, seen_at = :now, until = :until"
    " WHERE queue = :queue AND owner = :owner"
)
_LEAVE_QUEUE = q("UPDATE feeders SET until = :now WHERE queue = :queue AND owner = :owner")
_FEEDERS = q(
    "SELECT queue, executor, owner, until, cap, broker_length, seen_at FROM feeders ORDER BY queue"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Unpublished:
    """A job a feeder claimed whose publication nobody recorded."""

    job_id: int
    attempt: int
    task: str


@dataclass(frozen=True, kw_only=True, slots=True)
class FeederRow:
    queue: str
    executor: str
    owner: str
    until: float
    cap: int
    broker_length: int | None
    seen_at: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutorTask:
    """A task an external executor runs, with its jobs in flight by hand-off state."""

    task: str
    executor: str
    queue: str | None
    claimed: int
    queued: int
    started: int


class Handoffs:
    """Verbs of the hand-off to external executors (inside the caller's transaction)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def mark_claimed(self, ids: Sequence[int]) -> None:
        """Jobs a feeder just leased: not yet published as far as anyone knows."""
        if ids:
            clause, params = _ids(self.db, ids)
            self.db.execute(q(f"UPDATE jobs SET handoff = 'claimed' WHERE id {clause}"), params)

    def record_queued(self, jobs: Sequence[tuple[int, int]], until: float) -> int:
        """Jobs (id, attempt) the broker has: leased until *until* while they wait there.
        Returns how many were still this attempt's and unstarted."""
        rows = [{"id": i, "attempt": a, "until": until} for i, a in jobs]
        if not rows:
            return 0
        return sum(self.db.execute(_RECORD, row).rowcount for row in rows)

    def unpublished(
        self, tasks: Sequence[str], owner: str, lease: float, now: float, limit: int
    ) -> list[Unpublished]:
        """Take over claimed jobs whose lease lapsed before their publication was recorded
        (the feeder died between its claim and its record): they are published again, as
        the same attempt, so a copy already in the broker runs once at most."""
        if not tasks:
            return []
        clause, params = _ids(self.db, tasks)
        lock = "" if self.db.is_sqlite else "FOR UPDATE SKIP LOCKED"
        stmt = q(
            f"""
            UPDATE jobs SET owner = :owner, due_at = :now + :lease
            WHERE id IN (SELECT id FROM jobs WHERE status = 'running' AND NOT ready
                         AND handoff = 'claimed' AND due_at <= :now AND task {clause}
                         ORDER BY due_at LIMIT :limit {lock})
            RETURNING id, attempt, task
            """
        )
        params |= {"owner": owner, "lease": lease, "now": now, "limit": limit}
        return [
            Unpublished(job_id=r.id, attempt=r.attempt, task=r.task)
            for r in self.db.execute(stmt, params)
        ]

    def outstanding(self, tasks: Sequence[str]) -> int:
        """Jobs of *tasks* whose message is (or is being put) in the broker: published and
        not yet committed. Late-acknowledged messages stay in the queue until then, held by
        a worker; a worker that dies puts them back."""
        clause, params = _ids(self.db, tasks)
        stmt = q(
            f"SELECT count(*) FROM jobs WHERE task {clause} AND status = 'running'"
            " AND handoff IS NOT NULL"
        )
        return int(self.db.execute(stmt, params).scalar() or 0)

    def next_due(self, tasks: Sequence[str]) -> float | None:
        """The earliest time a job of *tasks* not due now becomes due (a retry, a revisit,
        a lease that lapses, a rate limit's next permit), or ``None``."""
        clause, params = _ids(self.db, tasks)
        stmt = q(
            f"SELECT min(due_at) FROM jobs WHERE NOT ready AND due_at IS NOT NULL AND task {clause}"
        )
        value = self.db.execute(stmt, params).scalar()
        return None if value is None else float(value)

    def start(self, job_id: int, attempt: int, owner: str, lease: float, now: float) -> Any:
        """An executor's worker takes the job to run it: the row for ``Store.claimed``, or
        ``None`` if this attempt is over or already started (a stale or second message)."""
        stmt = _START_SQLITE if self.db.is_sqlite else _START_POSTGRES
        params = {"id": job_id, "attempt": attempt, "owner": owner, "lease": lease, "now": now}
        rows = self.db.fetch(stmt, params)
        return rows[0] if rows else None

    def executor_tasks(self) -> list[ExecutorTask]:
        """Tasks with an external executor and their running jobs by hand-off state."""
        counts: dict[tuple[str, str], int] = {}
        for task, state, count in self.db.execute(_COUNTS):
            counts[(task, state)] = int(count)
        return [
            ExecutorTask(
                task=name,
                executor=executor,
                queue=queue,
                claimed=counts.get((name, CLAIMED), 0),
                queued=counts.get((name, QUEUED), 0),
                started=counts.get((name, STARTED), 0),
            )
            for name, executor, queue in self.db.execute(_EXECUTORS)
        ]

    # -- feeders ----------------------------------------------------------------------------

    def take_queue(
        self, queue: str, executor: str, owner: str, cap: int, until: float, now: float
    ) -> tuple[str, float] | None:
        """Lease *queue* for *owner*; ``None`` if taken, else the holder and its lease end."""
        params = {"queue": queue, "executor": executor, "owner": owner, "until": until}
        self.db.execute(_TAKE_QUEUE, params | {"cap": cap, "now": now})
        holder = self.db.execute(_QUEUE_HOLDER, {"queue": queue}).first()
        if holder is None or holder.owner == owner:
            return None
        return str(holder.owner), float(holder.until)

    def saw_queue(self, queue: str, owner: str, length: int, until: float, now: float) -> bool:
        """Record the queue's length in the broker and renew the feeder's lease on it;
        ``False`` if another feeder took the queue over."""
        params = {"queue": queue, "owner": owner, "length": length, "until": until, "now": now}
        return bool(self.db.execute(_SAW, params).rowcount)

    def leave_queue(self, queue: str, owner: str, now: float) -> None:
        self.db.execute(_LEAVE_QUEUE, {"queue": queue, "owner": owner, "now": now})

    def feeders(self) -> list[FeederRow]:
        return [
            FeederRow(
                queue=r.queue,
                executor=r.executor,
                owner=r.owner,
                until=r.until,
                cap=r.cap,
                broker_length=r.broker_length,
                seen_at=r.seen_at,
            )
            for r in self.db.execute(_FEEDERS)
        ]
