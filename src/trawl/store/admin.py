"""Operator commands on jobs and failures: expire, retry, handle."""

from __future__ import annotations

from typing import Any

from trawl.model.states import Journal
from trawl.store.items import Items
from trawl.store.sql import q

_EXPIRE = """
    UPDATE jobs SET due_at = :now, ready = true,
        expires_at = CASE WHEN expires_at IS NULL OR expires_at > :now THEN :now
                          ELSE expires_at END
    WHERE task = :task AND selected AND status <> 'running' {filter}
"""
_BY_TAG = "AND item_id IN (SELECT item_id FROM tags WHERE name = :tag)"
_BY_ITEM = "AND item_id = :item_id"

_RETRY = """
    UPDATE jobs SET due_at = :now, ready = true, fail_count = 0
    WHERE status = 'failed' AND selected AND id IN (
        SELECT job_id FROM failures WHERE {where})
"""
_HANDLE = "UPDATE failures SET handled = true WHERE NOT handled AND {where}"


def failure_filter(
    task: str | None, item_id: str | None, ids: list[int] | None
) -> tuple[str, dict[str, Any]]:
    """A WHERE clause over failures; with no filter at all, every failure matches."""
    where: list[str] = ["1 = 1"]
    params: dict[str, Any] = {}
    if task is not None:
        where.append("task = :task")
        params["task"] = task
    if item_id is not None:
        where.append("item_id = :item_id")
        params["item_id"] = item_id
    if ids:
        where.append(f"id IN ({', '.join(str(int(i)) for i in ids)})")
    return " AND ".join(where), params


def expire(items: Items, task: str, now: float, *, tag: str | None, item_id: str | None) -> int:
    """Make results of *task* due now (all, those of items with *tag*, or one item)."""
    filter_, params = "", {"task": task, "now": now}
    if tag is not None:
        filter_, params["tag"] = _BY_TAG, tag
    if item_id is not None:
        filter_, params["item_id"] = _BY_ITEM, item_id
    count = int(items.db.execute(q(_EXPIRE.format(filter=filter_)), params).rowcount)
    detail = {"count": count, "tag": tag}
    items.journal(Journal.JOB_EXPIRED, now, item_id, task, detail)
    return count


def retry(
    items: Items, now: float, task: str | None, item_id: str | None, ids: list[int] | None
) -> int:
    """Failed jobs matching the filter become due now with a fresh retry budget; their
    failures are marked handled."""
    where, params = failure_filter(task, item_id, ids)
    count = int(items.db.execute(q(_RETRY.format(where=where)), params | {"now": now}).rowcount)
    handle(items, now, task, item_id, ids)
    items.journal(Journal.JOB_RETRY, now, item_id, task, {"count": count})
    return count


def handle(
    items: Items, now: float, task: str | None, item_id: str | None, ids: list[int] | None
) -> int:
    where, params = failure_filter(task, item_id, ids)
    count = int(items.db.execute(q(_HANDLE.format(where=where)), params).rowcount)
    if count:
        items.journal(Journal.FAILURE_HANDLED, now, item_id, task, {"count": count, "ids": ids})
    return count
