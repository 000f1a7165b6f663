"""What the orchestrator and workers read about queues: due jobs per task, a sample of
them, orphans, held jobs, and lapsed leases (crashed attempts).

Counts are capped: the orchestrator needs "how much work, roughly", every fraction of a
second, and a capped count stays an index range scan however large the backlog.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from trawl.model.records import ClaimedJob
from trawl.store import codec
from trawl.store.connection import Database
from trawl.store.sql import q

# Due rows already in the claim index (``ready``), one task at a time.
_READY = q(
    "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE task = :task AND ready AND due_at <= :now"
    " LIMIT :cap) AS d"
)
# Rows whose time has come but that no claim has promoted yet (lapsed leases among them),
# for all tasks at once: the head of ``jobs_pending``.
_UNPROMOTED = q(
    "SELECT task, count(*) FROM (SELECT task FROM jobs WHERE NOT ready AND due_at IS NOT NULL"
    " AND due_at <= :now ORDER BY due_at LIMIT :cap) AS p GROUP BY task"
)
_SAMPLE = q(
    "SELECT j.item_id, i.data FROM jobs j JOIN items i ON i.id = j.item_id"
    " WHERE j.id IN (SELECT id FROM jobs WHERE task = :task AND ready AND due_at <= :now"
    "                ORDER BY niceness, ever_run, due_at LIMIT :limit)"
    " ORDER BY j.niceness, j.ever_run, j.due_at"
)
_TASK_NAMES = q("SELECT name FROM tasks ORDER BY name")
_HELD = q(
    "SELECT id, item_id, task, attempt, fail_count, not_found, result_hash, revisit_offset"
    " FROM jobs WHERE task = :task AND status = 'running' AND owner = :owner"
)


# A tracker's fences on what a pipeline sends: its leases, by job and by page. Hot-path
# statements (compiled once, sent with what is queued), as they run in every commit and plan
# batch of every pipeline; the id list is a JSON array on SQLite, an array on PostgreSQL.
_IN_IDS = {True: "IN (SELECT value FROM json_each(:ids))", False: "= ANY(:ids)"}  # by is_sqlite
_OWNED = {
    sqlite: q(f"SELECT id FROM jobs WHERE id {ids} AND status = 'running' AND owner = :owner")
    for sqlite, ids in _IN_IDS.items()
}
_HOLDING = {
    sqlite: q(
        "SELECT item_id, attempt FROM jobs WHERE task = :task AND status = 'running'"
        f" AND owner = :owner AND item_id {ids}"
    )
    for sqlite, ids in _IN_IDS.items()
}

_HELD_PAGES = q(
    "SELECT count(*) FROM jobs j JOIN crawl_pages p ON p.item_id = j.item_id"
    " WHERE j.task = :task AND j.status = 'running' AND j.owner = :owner"
    " AND p.crawl_id = :crawl"
)


def _held_job(r: Any) -> ClaimedJob:
    return ClaimedJob(
        job_id=r.id,
        item_id=r.item_id,
        task=r.task,
        attempt=r.attempt,
        data={},
        tags={},
        fail_count=r.fail_count,
        not_found=r.not_found,
        result_hash=r.result_hash,
        revisit_offset=r.revisit_offset,
    )


class Queues:
    """What is due per task, held by an owner, or lapsed: the orchestrator's and sweeper's reads."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def due_counts(self, tasks: Iterable[str], now: float, cap: int) -> dict[str, int]:
        """Due jobs of each of *tasks*, each counted up to *cap*."""
        names = list(tasks)
        with self.db.read():
            counts = {
                task: int(
                    self.db.execute(_READY, {"task": task, "now": now, "cap": cap}).scalar() or 0
                )
                for task in names
            }
            for task, count in self.db.execute(_UNPROMOTED, {"now": now, "cap": cap}):
                if task in counts:
                    counts[task] = min(cap, counts[task] + int(count))
        return counts

    def due_sample(self, task: str, now: float, limit: int) -> list[tuple[str, Any]]:
        """(item id, item data) of the first *limit* due jobs of *task*, in claim order."""
        with self.db.read():
            rows = self.db.execute(_SAMPLE, {"task": task, "now": now, "limit": limit}).all()
        return [(row.item_id, codec.loads(row.data)) for row in rows]

    def orphans(self, served: Iterable[str], now: float, cap: int) -> dict[str, int]:
        """Tasks known to the database that *served* leaves out, with their due jobs (capped)."""
        wanted = set(served)
        with self.db.read():
            others = [name for name in self.db.execute(_TASK_NAMES).scalars() if name not in wanted]
        counts = self.due_counts(others, now, cap) if others else {}
        return {task: count for task, count in counts.items() if count}

    def lapsed(
        self, tasks: Sequence[str], now: float, limit: int
    ) -> list[tuple[ClaimedJob, str | None]]:
        """Running jobs of *tasks* whose lease ran out without a commit, with who held them.

        The claim's promotion skips these (see claim.PROMOTE), so they are settled as crashed
        attempts before anything can lease them again."""
        if not tasks:
            return []
        clause = (
            "IN (SELECT value FROM json_each(:tasks))" if self.db.is_sqlite else "= ANY(:tasks)"
        )
        tasks_param: Any = codec.dumps(list(tasks)) if self.db.is_sqlite else list(tasks)
        stmt = q(
            "SELECT id, item_id, task, attempt, fail_count, not_found, result_hash, revisit_offset,"
            " owner FROM jobs WHERE NOT ready AND status = 'running' AND due_at IS NOT NULL"
            f" AND due_at <= :now AND task {clause} ORDER BY due_at LIMIT :limit"
        )
        rows: Sequence[Any] = self.db.execute(
            stmt, {"tasks": tasks_param, "now": now, "limit": limit}
        ).all()
        return [(_held_job(r), r.owner) for r in rows]

    def held(self, task: str, owner: str) -> list[ClaimedJob]:
        """The running jobs of *task* whose lease *owner* holds (data and tags left empty)."""
        with self.db.read():
            rows: Sequence[Any] = self.db.execute(_HELD, {"task": task, "owner": owner}).all()
        return [_held_job(r) for r in rows]

    def connected(self, sessions: Sequence[str]) -> set[str]:
        """Of *sessions* (``application_name`` values), those with a session still open at
        the server. A client killed while waiting for its COMMIT leaves that commit running:
        until its session is gone, a dead worker may still come to hold jobs. On SQLite a
        dead process holds nothing: its transaction committed before it died or never."""
        if self.db.is_sqlite or not sessions:
            return set()
        stmt = q(
            "SELECT DISTINCT application_name FROM pg_stat_activity"
            " WHERE application_name = ANY(:names)"
        )
        with self.db.read():
            return {row[0] for row in self.db.execute(stmt, {"names": list(sessions)})}

    def _ids_param(self, ids: Sequence[int] | Sequence[str]) -> tuple[str, Any]:
        sqlite = self.db.is_sqlite
        return _IN_IDS[sqlite], codec.dumps(list(ids)) if sqlite else list(ids)

    def owned(self, job_ids: Sequence[int], owner: str) -> set[int]:
        """Of *job_ids*, the running jobs whose lease *owner* holds."""
        if not job_ids:
            return set()
        _, ids = self._ids_param(job_ids)
        with self.db.read():  # joins the caller's transaction, if any
            rows = self.db.fetch(_OWNED[self.db.is_sqlite], {"ids": ids, "owner": owner})
        return {row[0] for row in rows}

    def committed_attempts(self, attempts: Sequence[tuple[int, int]]) -> set[int]:
        """Of (job id, attempt) pairs, the jobs whose attempt has ended in a commit of its
        own: not running, still at that attempt, and not settled as lost by a sweep (error
        type ``lost``). A commit repeated after a reconnect is then a no-op, not stale."""
        if not attempts:
            return set()
        wanted = dict(attempts)
        clause, ids = self._ids_param(list(wanted))
        stmt = q(
            f"SELECT j.id, j.attempt FROM jobs j WHERE j.id {clause} AND j.status <> 'running'"
            " AND NOT EXISTS (SELECT 1 FROM failures f WHERE f.job_id = j.id"
            " AND f.attempt = j.attempt AND f.error_type = 'lost')"
        )
        with self.db.read():
            rows = self.db.execute(stmt, {"ids": ids}).all()
        return {job for job, attempt in rows if wanted.get(job) == attempt}

    def holding(self, task: str, owner: str, item_ids: Sequence[str]) -> dict[str, int]:
        """The attempt *owner* holds the lease of, for each of *item_ids* whose *task* job
        it holds (one query however many)."""
        if not item_ids:
            return {}
        _, ids = self._ids_param(item_ids)
        params = {"task": task, "owner": owner, "ids": ids}
        return dict(self.db.fetch(_HOLDING[self.db.is_sqlite], params))

    def held_pages(self, task: str, owner: str, crawl_id: int) -> int:
        """How many of *crawl_id*'s pages *owner* holds leases of (the fetch *task*'s)."""
        found = self.db.execute(_HELD_PAGES, {"task": task, "owner": owner, "crawl": crawl_id})
        return int(found.scalar() or 0)
