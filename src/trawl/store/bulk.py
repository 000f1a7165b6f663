"""Adding many items at once: set-based statements instead of one round trip per row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from trawl.model.records import NewItem
from trawl.model.states import Journal
from trawl.store import codec, schema
from trawl.store.database import Database
from trawl.store.sql import NEW_JOBS, q

_JOBS = (
    NEW_JOBS
    + """
    SELECT DISTINCT t.item_id, tt.task, 'queued', :now, true, 0,
           COALESCE(:niceness, k.niceness), false, true, 0
    FROM tags t JOIN task_tags tt ON tt.tag = t.name JOIN tasks k ON k.name = tt.task
    WHERE t.item_id IN ({ids})
    ON CONFLICT (item_id, task) DO NOTHING
"""
)
_JOBS_SQLITE = q(_JOBS.format(ids="SELECT value FROM json_each(:ids)"))
_JOBS_POSTGRES = q(_JOBS.format(ids="SELECT unnest(CAST(:ids AS text[]))"))
_DROP = q("DELETE FROM items WHERE id = :id")
# Adding an id that exists lists it again: jobs disabled as "not found" run again.
_RELIST = """
    UPDATE jobs SET due_at = :now, ready = true, not_found = 0
    WHERE selected AND not_found > 0 AND due_at IS NULL AND status = 'failed'
      AND item_id IN (SELECT item_id FROM aliases WHERE alias IN ({ids}))
"""
_RELIST_SQLITE = q(_RELIST.format(ids="SELECT value FROM json_each(:ids)"))
_RELIST_POSTGRES = q(_RELIST.format(ids="SELECT unnest(CAST(:ids AS text[]))"))


def add_items(
    db: Database, new: Sequence[NewItem], now: float, created_by: str | None
) -> list[str]:
    """Create the items whose ids are free (inside the caller's transaction)."""
    wanted = {item.id: item for item in reversed(new)}  # the first of duplicate ids wins
    created = _insert(
        db, schema.items, "id", [_item_row(i, now, created_by) for i in wanted.values()]
    )
    aliased = set(
        _insert(db, schema.aliases, "alias", [{"alias": i, "item_id": i} for i in created])
    )
    for item_id in created:
        if item_id not in aliased:  # the id is already another item's alias
            db.execute(_DROP, {"id": item_id})
    created = [i for i in created if i in aliased]
    rows = [
        {"item_id": i, "name": name, "value": value}
        for i in created
        for name, value in wanted[i].tags
    ]
    _insert(db, schema.tags, None, rows)
    _create_jobs(db, [wanted[i] for i in created], now)
    fresh = set(created)
    _relist(db, [i for i in wanted if i not in fresh], now)
    db.journal(_journal(created, wanted, now, created_by))
    return created


def _item_row(item: NewItem, now: float, created_by: str | None) -> dict[str, Any]:
    return {
        "id": item.id,
        "data": codec.dumps(item.data),
        "created_by": created_by,
        "created_at": now,
        "updated_at": now,
    }


def _insert(
    db: Database, table: sa.Table, key: str | None, rows: list[dict[str, Any]]
) -> list[str]:
    if not rows:
        return []
    dialect = sqlite if db.is_sqlite else postgresql
    stmt = dialect.insert(table).on_conflict_do_nothing()
    if key is None:
        db.conn.execute(stmt, rows)
        return []
    result = db.conn.execute(stmt.returning(table.c[key]), rows)
    return list(result.scalars())


def _create_jobs(db: Database, items: list[NewItem], now: float) -> None:
    by_niceness: dict[int | None, list[str]] = {}
    for item in items:
        if item.tags:
            by_niceness.setdefault(item.niceness, []).append(item.id)
    stmt = _JOBS_SQLITE if db.is_sqlite else _JOBS_POSTGRES
    for niceness, ids in by_niceness.items():
        value: Any = codec.dumps(ids) if db.is_sqlite else ids
        db.execute(stmt, {"ids": value, "now": now, "niceness": niceness})


def _relist(db: Database, existing: list[str], now: float) -> None:
    if not existing:
        return
    stmt = _RELIST_SQLITE if db.is_sqlite else _RELIST_POSTGRES
    db.execute(stmt, {"ids": codec.dumps(existing) if db.is_sqlite else existing, "now": now})


def _journal(
    created: list[str], wanted: dict[str, NewItem], now: float, created_by: str | None
) -> list[dict[str, Any]]:
    rows = []
    for item_id in created:
        detail = codec.dumps({"created_by": created_by, "tags": dict(wanted[item_id].tags)})
        rows.append(
            {
                "at": now,
                "kind": Journal.ITEM_CREATED.value,
                "item_id": item_id,
                "task": None,
                "detail": detail,
            }
        )
    return rows
