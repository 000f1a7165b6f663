"""Adding many items at once: set-based statements instead of one round trip per row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from trawl.model.records import NewItem
from trawl.model.states import Journal
from trawl.store import codec
from trawl.store.connection import Database
from trawl.store.sql import NEW_JOBS, q

_JOBS = (
    NEW_JOBS
    + """
    SELECT DISTINCT t.item_id, tt.task, 'queued', :now, true, 0,
           COALESCE(:niceness, k.niceness), false, true, 0, CAST(NULL AS REAL)
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


def _batch_insert(
    table: str, columns: tuple[tuple[str, str], ...], returning: str | None
) -> tuple[sa.TextClause, sa.TextClause]:
    """INSERT of a JSON array of rows (one statement however many), skipping conflicts.

    One bound string instead of a row of parameters each: the statement text never changes
    (prepared once, no SQLAlchemy compile per call) and msgspec encodes the batch."""
    names = ", ".join(name for name, _ in columns)
    tail = " ON CONFLICT DO NOTHING" + (f" RETURNING {returning}" if returning else "")
    sqlite_cols = ", ".join(f"value ->> {i}" for i in range(len(columns)))
    pg_cols = ", ".join(f"CAST(e ->> {i} AS {kind})" for i, (_, kind) in enumerate(columns))
    # "WHERE true": SQLite would read ON CONFLICT as part of the SELECT's join otherwise.
    return (
        q(f"INSERT INTO {table} ({names}) SELECT {sqlite_cols} FROM json_each(:batch)"
          f" WHERE true{tail}"),
        q(f"INSERT INTO {table} ({names}) SELECT {pg_cols}"
          f" FROM jsonb_array_elements(CAST(:batch AS jsonb)) AS j(e){tail}"),
    )  # fmt: skip


_ITEMS = _batch_insert(
    "items",
    (("id", "text"), ("data", "text"), ("created_by", "text"), ("created_at", "float8"),
     ("updated_at", "float8")),
    "id",
)  # fmt: skip
_ALIASES = _batch_insert("aliases", (("alias", "text"), ("item_id", "text")), "alias")
_TAGS = _batch_insert("tags", (("item_id", "text"), ("name", "text"), ("value", "text")), None)


def add_items(
    db: Database, new: Sequence[NewItem], now: float, created_by: str | None
) -> list[str]:
    """Create the items whose ids are free (inside the caller's transaction), in the order
    given; of duplicate ids the first wins."""
    wanted: dict[str, NewItem] = {}
    for item in new:
        wanted.setdefault(item.id, item)
    # Rows go in in key order, whatever the order given: two transactions inserting
    # overlapping keys then take their index locks in the same order and cannot deadlock.
    ordered = sorted(wanted)
    data = [[i, codec.dumps(wanted[i].data), created_by, now, now] for i in ordered]
    inserted = set(_insert(db, _ITEMS, data))
    aliased = set(_insert(db, _ALIASES, [[i, i] for i in ordered if i in inserted]))
    for item_id in sorted(inserted - aliased):  # the id is already another item's alias
        db.execute(_DROP, {"id": item_id})
    created = [i for i in wanted if i in inserted and i in aliased]  # in the order given
    tags = [[i, name, value] for i in ordered if i in aliased for name, value in wanted[i].tags]
    _insert(db, _TAGS, tags)
    _create_jobs(db, [wanted[i] for i in ordered if i in aliased], now)
    fresh = set(created)
    _relist(db, [i for i in wanted if i not in fresh], now)
    db.journal(_journal(created, wanted, now, created_by))
    return created


def _insert(
    db: Database, stmt: tuple[sa.TextClause, sa.TextClause], rows: list[list[Any]]
) -> list[str]:
    """Run a batch insert; the keys it returns (the rows that did not conflict)."""
    if not rows:
        return []
    result = db.execute(stmt[0] if db.is_sqlite else stmt[1], {"batch": codec.dumps(rows)})
    return list(result.scalars()) if result.returns_rows else []


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
