"""Reads for commands and tasks: items with their jobs, status counts, failures, journal."""

from __future__ import annotations

from typing import Any

from trawl.model.records import (
    FailureRecord,
    ItemView,
    JobView,
    JournalEntry,
    TaskCounts,
)
from trawl.model.states import JobStatus
from trawl.store import codec
from trawl.store.admin import failure_filter
from trawl.store.connection import Database
from trawl.store.sql import RESOLVE, q

_ITEM = q("SELECT id, data, created_by, created_at, updated_at FROM items WHERE id = :id")
_TAGS = q("SELECT name, value FROM tags WHERE item_id = :id ORDER BY name")
_ALIASES = q("SELECT alias FROM aliases WHERE item_id = :id ORDER BY alias")
_JOBS = q(
    "SELECT task, status, due_at, attempt, owner, niceness, result, result_version, result_at,"
    " expires_at, ttl, succeeded, ever_run, selected, fail_count"
    " FROM jobs WHERE item_id = :id ORDER BY task"
)
_METADATA = q(
    "SELECT j.result FROM aliases a JOIN jobs j ON j.item_id = a.item_id"
    " WHERE a.alias = :alias AND j.task = :task"
)
_STATUS = q("SELECT task, status, count(*) FROM jobs GROUP BY task, status")
_DUE = q("SELECT task, count(*) FROM jobs WHERE due_at <= :now GROUP BY task")
_UNHANDLED = q("SELECT task, count(*) FROM failures WHERE NOT handled GROUP BY task")
_TASKS = q(
    "SELECT name, version, CASE WHEN paused THEN COALESCE(paused_reason, 'paused') END FROM tasks"
)
_TAGGED = q(
    "SELECT item_id FROM tags WHERE name = :tag AND item_id > :after ORDER BY item_id LIMIT :limit"
)
_JOURNAL = q(
    "SELECT seq, at, kind, item_id, task, detail FROM journal WHERE seq > :since"
    " AND seq <= :upto ORDER BY seq LIMIT :limit"
)


def tagged(db: Database, tag: str, after: str, limit: int) -> list[str]:
    """Ids of items carrying *tag*, in id order, after the id *after* (a cursor)."""
    params = {"tag": tag, "after": after, "limit": limit}
    return list(db.execute(_TAGGED, params).scalars())


def item(db: Database, alias: str) -> ItemView | None:
    """The item an id or alias resolves to, with tags, aliases and jobs."""
    with db.read():
        item_id = db.execute(RESOLVE, {"alias": alias}).scalar()
        if item_id is None:
            return None
        row = db.execute(_ITEM, {"id": item_id}).one()
        tags: dict[str, str | None] = dict(db.execute(_TAGS, {"id": item_id}).tuples().all())
        aliases = tuple(db.execute(_ALIASES, {"id": item_id}).scalars())
        jobs = tuple(_job(r) for r in db.execute(_JOBS, {"id": item_id}))
    return ItemView(
        id=row.id,
        data=codec.loads(row.data),
        tags=tags,
        aliases=aliases,
        created_by=row.created_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
        jobs=jobs,
    )


def _job(r: Any) -> JobView:
    return JobView(
        task=r.task,
        status=JobStatus(r.status),
        due_at=r.due_at,
        attempt=r.attempt,
        owner=r.owner,
        niceness=r.niceness,
        result=codec.loads(r.result),
        result_version=r.result_version,
        result_at=r.result_at,
        expires_at=r.expires_at,
        ttl=r.ttl,
        succeeded=None if r.succeeded is None else bool(r.succeeded),
        ever_run=bool(r.ever_run),
        selected=bool(r.selected),
        fail_count=r.fail_count,
    )


def metadata(db: Database, task: str, alias: str) -> dict[str, Any] | None:
    text = db.execute(_METADATA, {"alias": alias, "task": task}).scalar()
    value: dict[str, Any] | None = codec.loads(text)
    return value


def status(db: Database, now: float) -> list[TaskCounts]:
    """Per task: jobs by status, how many are due now, unhandled failures."""
    with db.read():
        counts: dict[str, dict[str, int]] = {}
        for task, state, count in db.execute(_STATUS):
            counts.setdefault(task, {})[state] = count
        due = dict(db.execute(_DUE, {"now": now}).tuples().all())
        unhandled = dict(db.execute(_UNHANDLED).tuples().all())
        tasks = {name: (version, paused) for name, version, paused in db.execute(_TASKS)}
        versions = {name: version for name, (version, _) in tasks.items()}
    names = sorted(set(counts) | set(versions))
    return [
        TaskCounts(
            task=name,
            version=versions.get(name),
            queued=counts.get(name, {}).get("queued", 0),
            running=counts.get(name, {}).get("running", 0),
            done=counts.get(name, {}).get("done", 0),
            failed=counts.get(name, {}).get("failed", 0),
            skipped=counts.get(name, {}).get("skipped", 0),
            due_now=due.get(name, 0),
            unhandled_failures=unhandled.get(name, 0),
            registered=name in versions,
            paused=tasks[name][1] if name in tasks else None,
        )
        for name in names
    ]


def failures(
    db: Database,
    *,
    task: str | None = None,
    item_id: str | None = None,
    include_handled: bool = False,
    limit: int = 100,
) -> list[FailureRecord]:
    where, params = failure_filter(task, item_id, None)
    params["limit"] = limit
    if not include_handled:
        where += " AND NOT handled"
    stmt = q(
        "SELECT id, job_id, item_id, task, attempt, error_type, message, traceback,"
        f" occurred_at, handled FROM failures WHERE {where}"
        " ORDER BY id DESC LIMIT :limit"
    )
    return [failure_record(r) for r in db.execute(stmt, params)]


def failure_record(r: Any) -> FailureRecord:
    """A ``failures`` row as a record (every listing of failures reads these columns)."""
    return FailureRecord(
        id=r.id,
        job_id=r.job_id,
        item_id=r.item_id,
        task=r.task,
        attempt=r.attempt,
        error_type=r.error_type,
        message=r.message,
        traceback=r.traceback,
        occurred_at=r.occurred_at,
        handled=bool(r.handled),
    )


def journal_entry(r: Any) -> JournalEntry:
    """A ``journal`` row as a record."""
    return JournalEntry(
        seq=r.seq,
        at=r.at,
        kind=r.kind,
        item_id=r.item_id,
        task=r.task,
        detail=codec.loads(r.detail),
    )


def journal(db: Database, since: int = 0, limit: int = 1000) -> list[JournalEntry]:
    """Entries after the seq *since*, oldest first, up to the settled horizon: the last seq
    returned is a cursor no entry committed later can fall behind."""
    params = {"since": since, "upto": db.journal_horizon(), "limit": limit}
    return [journal_entry(r) for r in db.execute(_JOURNAL, params)]
