"""Scheduling state outside the claim: task options, limits, pauses, dependency wake-ups,
relisting, and the failure stop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trawl.model.limits import Limit
from trawl.model.records import TaskInfo
from trawl.model.states import Journal
from trawl.store import codec
from trawl.store.connection import Database
from trawl.store.items import Items
from trawl.store.notify import CHANNEL
from trawl.store.sql import q

_SET_OPTIONS = q(
    "UPDATE tasks SET max_failures = :max_failures, executor = :executor, queue = :queue"
    " WHERE name = :name"
)
_CLEAR_DEPS = q("DELETE FROM task_deps WHERE task = :name")
_ADD_DEP = q("INSERT INTO task_deps (task, depends_on, on_change) VALUES (:name, :dep, :on_change)")
_UPSERT_LIMIT = q(
    "INSERT INTO limits (name, rate, burst, tasks, keyed, registered_at)"
    " VALUES (:name, :rate, :burst, :tasks, :keyed, :now)"
    " ON CONFLICT (name) DO UPDATE SET rate = excluded.rate, burst = excluded.burst,"
    " tasks = excluded.tasks, keyed = excluded.keyed, registered_at = excluded.registered_at"
)
_PAUSE = q(
    "UPDATE tasks SET paused = :paused, paused_reason = :reason WHERE name = :name"
    " AND paused <> :paused"
)
_UNHANDLED = q("SELECT count(*) FROM failures WHERE task = :task AND NOT handled AND NOT allowed")
_STOPPABLE = q("SELECT name, max_failures FROM tasks WHERE max_failures IS NOT NULL AND NOT paused")


def register_options(db: Database, info: TaskInfo) -> None:
    """Store what claims and commits elsewhere need to know of the task."""
    options = {"max_failures": info.max_failures, "executor": info.executor, "queue": info.queue}
    db.execute(_SET_OPTIONS, {"name": info.name} | options)
    db.execute(_CLEAR_DEPS, {"name": info.name})
    db.executemany(
        _ADD_DEP,
        [{"name": info.name, "dep": d, "on_change": info.rerun_on_change} for d in info.depends_on],
    )


def register_limits(db: Database, limits: Sequence[Limit], now: float) -> None:
    db.executemany(
        _UPSERT_LIMIT,
        [
            {
                "name": lim.name,
                "rate": lim.rate,
                "burst": lim.burst,
                "tasks": None if lim.tasks is None else codec.dumps(list(lim.tasks)),
                "keyed": lim.key is not None,
                "now": now,
            }
            for lim in limits
        ],
    )


def set_paused(items: Items, task: str, paused: bool, reason: str | None, now: float) -> bool:
    params = {"name": task, "paused": paused, "reason": reason}
    changed = bool(items.db.execute(_PAUSE, params).rowcount)
    if changed:
        kind = Journal.TASK_PAUSED if paused else Journal.TASK_RESUMED
        items.journal(kind, now, None, task, {"reason": reason})
    return changed


def stop_failing(items: Items, tasks: set[str], now: float) -> list[str]:
    """Pause each of *tasks* whose unhandled failures reached its ``max_failures``."""
    stopped = []
    for name, most in items.db.execute(_STOPPABLE).all():
        if name not in tasks:
            continue
        count = int(items.db.execute(_UNHANDLED, {"task": name}).scalar() or 0)
        if count >= most:
            reason = f"{count} unhandled failures (max_failures={most})"
            set_paused(items, name, True, reason, now)
            stopped.append(name)
    return stopped


# Driven from task_deps (CROSS JOIN fixes that order on SQLite): with no dependencies
# declared, which is most apps, every commit's wake-up reads one empty table and stops.
# The EXISTS is a one-time check PostgreSQL makes first: without statistics it planned the
# join as a scan of every job, once a commit.
_WAKE = """
    UPDATE jobs SET due_at = :now, ready = true, waiting = NULL
    WHERE EXISTS (SELECT 1 FROM task_deps) AND selected AND status <> 'running' AND id IN (
        SELECT j.id FROM task_deps d
        CROSS JOIN ({batch}) AS b
        CROSS JOIN jobs j
        WHERE b.task = d.depends_on AND j.item_id = b.item_id AND j.task = d.task
          AND (j.waiting = 'deps' OR (d.on_change AND b.changed)))
"""
_WAKE_SQLITE = q(
    _WAKE.format(
        batch="SELECT value ->> 0 AS item_id, value ->> 1 AS task, value ->> 2 AS changed"
        " FROM json_each(:batch)"
    )
)
# Workers waiting for work hear of the woken jobs in the same statement, so the commit
# needs no answer back from it (it travels in the commit's pipeline).
_WAKE_POSTGRES = q(
    "WITH woken AS ("
    + _WAKE.format(
        batch="SELECT e ->> 0 AS item_id, e ->> 1 AS task, CAST(e ->> 2 AS bool) AS changed"
        " FROM jsonb_array_elements(CAST(:batch AS jsonb)) AS u(e)"
    )
    + f" RETURNING 1) SELECT pg_notify('{CHANNEL}', '') WHERE EXISTS (SELECT 1 FROM woken)"
)


def wake_dependents(db: Database, done: Sequence[tuple[str, str, bool]], now: float) -> None:
    """Jobs waiting on (item, task) results that just committed become due; so do those that
    re-run when a dependency's result changed. On PostgreSQL, waiting workers are told."""
    if not done:
        return
    params: dict[str, Any] = {"batch": codec.dumps([list(row) for row in done]), "now": now}
    db.send(_WAKE_SQLITE if db.is_sqlite else _WAKE_POSTGRES, params)


_RELIST = q(
    """
    UPDATE jobs SET due_at = :now, ready = true, not_found = 0
    WHERE item_id = :item_id AND selected AND not_found > 0 AND due_at IS NULL
      AND status = 'failed'
    """
)
_SEEN = q(
    "UPDATE items SET last_seen = :now, first_seen = COALESCE(first_seen, :now),"
    " last_update = COALESCE(:last_update, last_update) WHERE id = :item_id"
)


# Kept on the jobs too, so each visit policy reads an index of its own (store/policies.py).
_SOURCE_UPDATE = q("UPDATE jobs SET source_update = :last_update WHERE item_id = :item_id")


def relist(db: Database, item_id: str, now: float, last_update: float | None = None) -> None:
    """The item was listed again: jobs disabled as not found run again; seen times move."""
    db.execute(_RELIST, {"item_id": item_id, "now": now})
    db.execute(_SEEN, {"item_id": item_id, "now": now, "last_update": last_update})
    if last_update is not None:
        db.execute(_SOURCE_UPDATE, {"item_id": item_id, "last_update": last_update})


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitRow:
    name: str
    rate: float
    burst: int
    tasks: list[str] | None
    keyed: bool
    keys: int
    throttled: int
    waiting: int


_LIMITS = q("SELECT name, rate, burst, tasks, keyed FROM limits ORDER BY name")
_KEYS = q(
    "SELECT name, count(*), sum(CASE WHEN tat - :now > (:tolerance) THEN 1 ELSE 0 END)"
    " FROM limit_state WHERE name = :name GROUP BY name"
)
_WAITING = q(
    "SELECT waiting, count(*) FROM jobs WHERE waiting IS NOT NULL AND due_at > :now"
    " GROUP BY waiting"
)


def limit_rows(db: Database, now: float) -> list[LimitRow]:
    """Each registered limit: keys tracked, keys with no permit free now, jobs deferred."""
    waiting = dict(db.execute(_WAITING, {"now": now}).tuples().all())
    rows = []
    for name, rate, burst, tasks, keyed in db.execute(_LIMITS).all():
        tolerance = (burst - 1) / rate
        params = {"name": name, "now": now, "tolerance": tolerance}
        found = db.execute(_KEYS, params).first()
        rows.append(
            LimitRow(
                name=name,
                rate=rate,
                burst=burst,
                tasks=codec.loads(tasks),
                keyed=bool(keyed),
                keys=int(found[1]) if found else 0,
                throttled=int(found[2] or 0) if found else 0,
                waiting=int(waiting.get(f"limit:{name}", 0)),
            )
        )
    return rows
