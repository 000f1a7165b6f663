"""Adding many items at once: set-based statements instead of one round trip per row.

Each dialect gets the form its driver sends fastest: on SQLite (in-process, one writer)
one insert per table over a JSON array of the rows (``json_each``), the free ids found
first under the write lock;
on PostgreSQL one ``INSERT ... SELECT FROM unnest(...)`` per table over typed arrays, the
items and their own aliases in one statement whose answer says which ids were created, the
rest queued in the pipeline behind it (one round trip a batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trawl.model.records import NewItem
from trawl.model.states import Journal
from trawl.store import codec
from trawl.store.connection import Database
from trawl.store.sql import NEW_JOBS, q

Wanted = dict[str, NewItem]

_JOBS = (
    NEW_JOBS
    + """
    SELECT DISTINCT t.item_id, tt.task, 'queued', :now, true, 0,
           COALESCE(:niceness, k.niceness), false, true, 0, CAST(NULL AS REAL)
    FROM tags t JOIN task_tags tt ON tt.tag = t.name JOIN tasks k ON k.name = tt.task
    WHERE t.item_id {ids}
    ON CONFLICT (item_id, task) DO NOTHING
"""
)
# "= ANY(array)", not "IN (SELECT unnest(...))": without statistics (a new database, or a
# server without autovacuum) PostgreSQL planned the latter as a scan of every tag - each
# crawl commit read the whole table.
_JOBS_SQLITE = q(_JOBS.format(ids="IN (SELECT value FROM json_each(:ids))"))
_JOBS_POSTGRES = q(_JOBS.format(ids="= ANY(CAST(:ids AS text[]))"))
# Adding an id that exists lists it again: jobs disabled as "not found" run again.
_RELIST = """
    UPDATE jobs SET due_at = :now, ready = true, not_found = 0
    WHERE selected AND not_found > 0 AND due_at IS NULL AND status = 'failed'
      AND item_id IN (SELECT item_id FROM aliases WHERE alias {ids})
"""
_RELIST_SQLITE = q(_RELIST.format(ids="IN (SELECT value FROM json_each(:ids))"))
_RELIST_POSTGRES = q(_RELIST.format(ids="= ANY(CAST(:ids AS text[]))"))

# -- SQLite: one writer holds the lock, so the ids found free stay free until COMMIT --------
_TAKEN_SQLITE = q(
    "SELECT value FROM json_each(:ids)"
    " WHERE value IN (SELECT id FROM items) OR value IN (SELECT alias FROM aliases)"
)
# Not an executemany: sqlite3 drops the GIL around each row's step and takes it back, which
# in a crawl (the event loop's thread busy beside the database thread) made a row cost
# several times its work; alone, the two forms cost the same (4.3-6.2 us a row).
_ITEM_SQLITE = q(
    "INSERT INTO items (id, data, created_by, created_at, updated_at)"
    " SELECT value ->> 0, value ->> 1, :by, :now, :now FROM json_each(:rows)"
)
_ALIAS_SQLITE = q("INSERT INTO aliases (alias, item_id) SELECT value, value FROM json_each(:ids)")
# A tag named twice on one item: the first is kept (as the other inserts keep the first).
_TAG_SQLITE = q(
    "INSERT INTO tags (item_id, name, value) SELECT value ->> 0, value ->> 1, value ->> 2"
    " FROM json_each(:rows) WHERE true ON CONFLICT DO NOTHING"
)

# -- PostgreSQL: typed arrays, unnested server-side ---------------------------------------
# An id that is already another item's alias gets an items row but no alias row: the
# answer's second column says so, and that row is dropped again (_DROP).
_CREATE_POSTGRES = q(
    """
    WITH item AS (
        INSERT INTO items (id, data, created_by, created_at, updated_at)
        SELECT id, data, :by, :now, :now
        FROM unnest(CAST(:ids AS text[]), CAST(:datas AS text[])) AS n(id, data)
        ON CONFLICT DO NOTHING RETURNING id
    ), alias AS (
        INSERT INTO aliases (alias, item_id) SELECT id, id FROM item ORDER BY id
        ON CONFLICT DO NOTHING RETURNING alias
    )
    SELECT item.id, alias.alias IS NOT NULL FROM item LEFT JOIN alias ON alias.alias = item.id
"""
)
_TAGS_POSTGRES = q(
    "INSERT INTO tags (item_id, name, value)"
    " SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:names AS text[]),"
    " CAST(:tag_values AS text[])) ON CONFLICT DO NOTHING"
)
_DROP = q("DELETE FROM items WHERE id = ANY(CAST(:ids AS text[]))")


def add_items(
    db: Database, new: Sequence[NewItem], now: float, created_by: str | None
) -> list[str]:
    """Create the items whose ids are free (inside the caller's transaction), in the order
    given; of duplicate ids the first wins."""
    if not new:
        return []
    wanted: Wanted = {}
    for item in new:
        wanted.setdefault(item.id, item)
    # Rows go in in key order, whatever the order given: two transactions inserting
    # overlapping keys then take their index locks in the same order and cannot deadlock.
    ordered = sorted(wanted)
    create = _create_sqlite if db.is_sqlite else _create_postgres
    fresh = create(db, wanted, ordered, now, created_by)
    _create_jobs(db, [wanted[i] for i in ordered if i in fresh], now)
    _relist(db, [i for i in wanted if i not in fresh], now)
    created = [i for i in wanted if i in fresh]  # in the order given
    db.journal(_journal(created, wanted, now, created_by))
    return created


def _create_sqlite(
    db: Database, wanted: Wanted, ordered: list[str], now: float, by: str | None
) -> set[str]:
    """The items, their own aliases and their tags; the ids created."""
    taken = {row[0] for row in db.fetch(_TAKEN_SQLITE, {"ids": codec.dumps(ordered)})}
    free = [i for i in ordered if i not in taken]
    if not free:
        return set()
    rows = codec.dumps([(i, codec.dumps(wanted[i].data)) for i in free])
    db.send(_ITEM_SQLITE, {"rows": rows, "by": by, "now": now})
    db.send(_ALIAS_SQLITE, {"ids": codec.dumps(free)})
    tags = [(i, n, v) for i in free for n, v in wanted[i].tags]
    if tags:
        db.send(_TAG_SQLITE, {"rows": codec.dumps(tags)})
    return set(free)


def _create_postgres(
    db: Database, wanted: Wanted, ordered: list[str], now: float, by: str | None
) -> set[str]:
    datas = [codec.dumps(wanted[i].data) for i in ordered]
    params = {"ids": ordered, "datas": datas, "by": by, "now": now}
    answer = db.fetch(_CREATE_POSTGRES, params)
    fresh = {item_id for item_id, aliased in answer if aliased}
    orphans = sorted(item_id for item_id, aliased in answer if not aliased)
    if orphans:  # the id is already another item's alias
        db.send(_DROP, {"ids": orphans})
    ids, names, values = [], [], []
    for item_id in sorted(fresh):
        for name, value in wanted[item_id].tags:
            ids.append(item_id)
            names.append(name)
            values.append(value)
    if ids:
        db.send(_TAGS_POSTGRES, {"ids": ids, "names": names, "tag_values": values})
    return fresh


def _create_jobs(db: Database, items: list[NewItem], now: float) -> None:
    by_niceness: dict[int | None, list[str]] = {}
    for item in items:
        if item.tags:
            by_niceness.setdefault(item.niceness, []).append(item.id)
    stmt = _JOBS_SQLITE if db.is_sqlite else _JOBS_POSTGRES
    for niceness, ids in by_niceness.items():
        value: Any = codec.dumps(ids) if db.is_sqlite else ids
        db.send(stmt, {"ids": value, "now": now, "niceness": niceness})


def _relist(db: Database, existing: list[str], now: float) -> None:
    if not existing:
        return
    stmt = _RELIST_SQLITE if db.is_sqlite else _RELIST_POSTGRES
    db.send(stmt, {"ids": codec.dumps(existing) if db.is_sqlite else existing, "now": now})


def _journal(
    created: list[str], wanted: Wanted, now: float, created_by: str | None
) -> list[dict[str, Any]]:
    kind = Journal.ITEM_CREATED.value
    return [
        {
            "at": now,
            "kind": kind,
            "item_id": item_id,
            "task": None,
            "detail": codec.dumps({"created_by": created_by, "tags": dict(wanted[item_id].tags)}),
        }
        for item_id in created
    ]
