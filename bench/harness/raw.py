"""The raw-SQL limit: the same work as trawl on the same tables with the driver alone.

Processing: claim a batch (the same ``jobs_claim`` range scan, ``SKIP LOCKED`` on
PostgreSQL) in one transaction, then complete it fenced on ``attempt`` in another — no
journal, no item data, no framework. Enqueueing: the rows ``Store.add_items`` writes (items,
aliases, tags, jobs and the two journal rows per item), bulk or one transaction per item.
"""

from __future__ import annotations

import time
from typing import Any

from harness.seed import TAG, TASK

_CLAIM_POSTGRES = """
    WITH picked AS (
        SELECT id FROM jobs WHERE task = %(task)s AND ready AND due_at <= %(now)s
        ORDER BY niceness, ever_run, due_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
    UPDATE jobs SET status = 'running', attempt = jobs.attempt + 1, due_at = %(now)s + 300,
                    ready = false, owner = 'raw'
    FROM picked WHERE jobs.id = picked.id
    RETURNING jobs.id, jobs.attempt
"""
_COMPLETE_POSTGRES = """
    UPDATE jobs SET status = 'done', due_at = NULL, ready = false, owner = NULL,
                    ever_run = true, succeeded = true, result_at = %(now)s, fail_count = 0
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS b(id, attempt)
    WHERE jobs.id = b.id AND jobs.attempt = b.attempt AND jobs.status = 'running'
"""
_CLAIM_SQLITE = """
    UPDATE jobs SET status = 'running', attempt = attempt + 1, due_at = :now + 300,
                    ready = false, owner = 'raw'
    WHERE id IN (SELECT id FROM jobs WHERE task = :task AND ready AND due_at <= :now
                 ORDER BY niceness, ever_run, due_at LIMIT :limit)
    RETURNING id, attempt
"""
_COMPLETE_SQLITE = """
    UPDATE jobs SET status = 'done', due_at = NULL, ready = false, owner = NULL,
                    ever_run = true, succeeded = true, result_at = ?, fail_count = 0
    WHERE id = ? AND attempt = ? AND status = 'running'
"""


def process(conn: Any, backend: str, batch: int) -> int:
    """Claim and complete every due ``noop`` job, *batch* at a time; returns how many."""
    step = _step_sqlite if backend == "sqlite" else _step_postgres
    total = 0
    while count := step(conn, batch):
        total += count
    return total


def _step_sqlite(conn: Any, batch: int) -> int:
    conn.execute("BEGIN IMMEDIATE")
    params = {"task": TASK, "now": time.time(), "limit": batch}
    claimed = conn.execute(_CLAIM_SQLITE, params).fetchall()
    conn.execute("COMMIT")
    if claimed:
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(_COMPLETE_SQLITE, [(now, job, attempt) for job, attempt in claimed])
        conn.execute("COMMIT")
    return len(claimed)


def _step_postgres(conn: Any, batch: int) -> int:
    params = {"task": TASK, "now": time.time(), "limit": batch}
    claimed = conn.execute(_CLAIM_POSTGRES, params).fetchall()
    conn.commit()
    if claimed:
        ids, attempts = [list(c) for c in zip(*claimed, strict=True)]
        conn.execute(_COMPLETE_POSTGRES, {"ids": ids, "attempts": attempts, "now": time.time()})
        conn.commit()
    return len(claimed)


# -- enqueue ------------------------------------------------------------------------------

_INSERTS_SQLITE = (
    "INSERT INTO items (id, data, created_by, created_at, updated_at)"
    " VALUES (:id, :data, NULL, :now, :now) ON CONFLICT (id) DO NOTHING",
    "INSERT INTO aliases (alias, item_id) VALUES (:id, :id) ON CONFLICT (alias) DO NOTHING",
    "INSERT INTO tags (item_id, name, value) VALUES (:id, :tag, NULL)",
    "INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,"
    " selected, fail_count) VALUES (:id, :task, 'queued', :now, true, 0, 0, false, true, 0)",
    "INSERT INTO journal (at, kind, item_id, task, detail)"
    " VALUES (:now, 'item.created', :id, NULL, '{\"created_by\":null}')",
    "INSERT INTO journal (at, kind, item_id, task, detail)"
    " VALUES (:now, 'tag.added', :id, NULL, :tagdetail)",
)

_ARRAYS = "unnest(%(ids)s::text[], %(datas)s::text[]) AS n(id, data)"
_INSERTS_POSTGRES = (
    "INSERT INTO items (id, data, created_by, created_at, updated_at)"
    f" SELECT id, data, NULL, %(now)s, %(now)s FROM {_ARRAYS} ON CONFLICT (id) DO NOTHING",
    f"INSERT INTO aliases (alias, item_id) SELECT id, id FROM {_ARRAYS}"
    " ON CONFLICT (alias) DO NOTHING",
    f"INSERT INTO tags (item_id, name, value) SELECT id, %(tag)s, NULL FROM {_ARRAYS}",
    "INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,"
    " selected, fail_count)"
    f" SELECT id, %(task)s, 'queued', %(now)s, true, 0, 0, false, true, 0 FROM {_ARRAYS}",
    "INSERT INTO journal (at, kind, item_id, task, detail)"
    f" SELECT %(now)s, 'item.created', id, NULL, '{{\"created_by\":null}}' FROM {_ARRAYS}",
    "INSERT INTO journal (at, kind, item_id, task, detail)"
    f" SELECT %(now)s, 'tag.added', id, NULL, %(tagdetail)s FROM {_ARRAYS}",
)
_TAG_DETAIL = f'{{"tag":"{TAG}","value":null}}'


def enqueue(conn: Any, backend: str, items: list[tuple[str, str]], per_item: bool) -> None:
    """Insert *items* (id, data JSON) as tagged items with their jobs: in one transaction,
    or (``per_item``) one transaction each."""
    groups = [[item] for item in items] if per_item else [items]
    for group in groups:
        if backend == "sqlite":
            _enqueue_sqlite(conn, group)
        else:
            _enqueue_postgres(conn, group)


# The same rows by binary COPY, one table after the other, in one transaction (PostgreSQL):
# no conflict handling and nothing checked, so what writing these rows costs the server at
# the least. The journal's item.created and tag.added rows go in one COPY, in that order.
_COPIES = (
    ("items (id, data, created_at, updated_at)", ("text", "text", "float8", "float8")),
    ("aliases (alias, item_id)", ("text", "text")),
    ("tags (item_id, name)", ("text", "text")),
    (
        "jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run, selected,"
        " fail_count)",
        ("text", "text", "text", "float8", "bool", "int4", "int4", "bool", "bool", "int4"),
    ),
    ("journal (at, kind, item_id, detail)", ("float8", "text", "text", "text")),
)


def copy_enqueue(conn: Any, items: list[tuple[str, str]]) -> None:
    """Insert *items* (id, data JSON) with their rows by COPY, in one transaction."""
    now = time.time()
    for (table, types), rows in zip(_COPIES, _copy_rows(items, now), strict=True):
        with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)
    conn.commit()


def _copy_rows(items: list[tuple[str, str]], now: float) -> list[Any]:
    created = '{"created_by":null}'
    return [
        ((i, d, now, now) for i, d in items),
        ((i, i) for i, _ in items),
        ((i, TAG) for i, _ in items),
        ((i, TASK, "queued", now, True, 0, 0, False, True, 0) for i, _ in items),
        (
            row
            for i, _ in items
            for row in ((now, "item.created", i, created), (now, "tag.added", i, _TAG_DETAIL))
        ),
    ]


def _enqueue_sqlite(conn: Any, items: list[tuple[str, str]]) -> None:
    now = time.time()
    rows = [
        {"id": i, "data": d, "now": now, "tag": TAG, "task": TASK, "tagdetail": _TAG_DETAIL}
        for i, d in items
    ]
    conn.execute("BEGIN IMMEDIATE")
    for statement in _INSERTS_SQLITE:
        conn.executemany(statement, rows)
    conn.execute("COMMIT")


def _enqueue_postgres(conn: Any, items: list[tuple[str, str]]) -> None:
    ids, datas = [list(c) for c in zip(*items, strict=True)]
    params = {
        "ids": ids,
        "datas": datas,
        "now": time.time(),
        "tag": TAG,
        "task": TASK,
        "tagdetail": _TAG_DETAIL,
    }
    for statement in _INSERTS_POSTGRES:
        conn.execute(statement, params)
    conn.commit()
