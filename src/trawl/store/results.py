"""Writes to a job's stored result from effects: metadata, expiry, TTL override, merges."""

from __future__ import annotations

from typing import Any

from trawl.store.connection import Database
from trawl.store.sql import q

_RESULT = q(
    "SELECT result, result_version, result_at, expires_at, succeeded, ever_run FROM jobs"
    " WHERE item_id = :item_id AND task = :task"
)
_RESULTS = q(
    "SELECT task, result, result_version, result_at, expires_at, succeeded, ever_run"
    " FROM jobs"
    " WHERE item_id = :item_id AND result IS NOT NULL"
)
_SET_RESULT = q("UPDATE jobs SET result = :result WHERE item_id = :item_id AND task = :task")
# A job created only to hold metadata (a merge, another task's update_metadata) is done only
# if the result came from a run; otherwise it stays queued, so selecting it later runs it.
_PUT_RESULT = q(
    """
    INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,
                      selected, result, result_version, result_at, expires_at, succeeded,
                      fail_count)
    VALUES (:item_id, :task, CASE WHEN :ever_run THEN 'done' ELSE 'queued' END, NULL, false,
            0, 0, :ever_run, false, :result, :result_version, :result_at, :expires_at,
            :succeeded, 0)
    ON CONFLICT (item_id, task) DO UPDATE SET
        result = excluded.result, result_version = excluded.result_version,
        result_at = excluded.result_at, expires_at = excluded.expires_at,
        succeeded = excluded.succeeded
    """
)
_EXPIRE = q(
    """
    UPDATE jobs SET due_at = :now, ready = true,
        expires_at = CASE WHEN expires_at IS NULL OR expires_at > :now THEN :now
                          ELSE expires_at END
    WHERE item_id = :item_id AND task = :task AND selected AND status <> 'running'
    """
)
_TASK_TTL = "(SELECT ttl FROM tasks WHERE name = jobs.task)"
_SET_TTL = q(
    f"""
    UPDATE jobs SET ttl = :ttl,
        expires_at = CASE WHEN status = 'running' THEN expires_at
                          ELSE result_at + COALESCE(:ttl, {_TASK_TTL}) END,
        due_at = CASE WHEN status = 'done' AND selected
                      THEN result_at + COALESCE(:ttl, {_TASK_TTL}) ELSE due_at END,
        ready = CASE WHEN status = 'done' AND selected
                     THEN COALESCE(result_at + COALESCE(:ttl, {_TASK_TTL}) <= :now, false)
                     ELSE ready END
    WHERE item_id = :item_id AND task = :task
    """
)


class Results:
    """Stored task results (metadata) addressed by item and task."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, item_id: str, task: str) -> dict[str, Any] | None:
        row = self.db.execute(_RESULT, {"item_id": item_id, "task": task}).first()
        return None if row is None else dict(row._mapping)

    def all_of(self, item_id: str) -> dict[str, dict[str, Any]]:
        rows = self.db.execute(_RESULTS, {"item_id": item_id})
        return {r.task: dict(r._mapping) for r in rows}

    def set_metadata(self, item_id: str, task: str, result: str) -> bool:
        params = {"item_id": item_id, "task": task, "result": result}
        return bool(self.db.execute(_SET_RESULT, params).rowcount)

    def put(self, item_id: str, task: str, row: dict[str, Any]) -> None:
        """Store a whole result row (from a merge) on the item's job for *task*."""
        params = {key: row[key] for key in _RESULT_KEYS} | {"item_id": item_id, "task": task}
        self.db.execute(_PUT_RESULT, params)

    def expire(self, item_id: str, task: str, now: float) -> int:
        params = {"item_id": item_id, "task": task, "now": now}
        return int(self.db.execute(_EXPIRE, params).rowcount)

    def set_ttl(self, item_id: str, task: str, ttl: float | None, now: float) -> int:
        params = {"item_id": item_id, "task": task, "ttl": ttl, "now": now}
        return int(self.db.execute(_SET_TTL, params).rowcount)


_RESULT_KEYS = ("result", "result_version", "result_at", "expires_at", "succeeded", "ever_run")
