"""Fast set-up: rows straight into items, aliases, tags and jobs with bulk SQL (not timed).

The rows are the ones ``Store.add_items`` makes for an item tagged ``noop`` (or, for
``DONE``, what a successful commit leaves with a TTL far in the future), minus the journal
rows of their creation, which no benchmark reads.
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Iterator
from typing import Any

TAG = "noop"
TASK = "noop"
FAR = 10 * 365 * 86400.0  # a TTL that never passes during a run
CHUNK = 1_000_000


class Kind(enum.Enum):
    DUE = "due"  # queued, never run, due now: what a worker will claim
    DONE = "done"  # done, result fresh for ten years: present but not due
    EXPIRED = "expired"  # done, its TTL just passed: due, waiting in jobs_pending


def _jobs_select(kind: Kind, ident: str) -> str:
    if kind is Kind.DUE:
        return (
            f"SELECT {ident}, '{TASK}', 'queued', :now, true, 0, NULL, 0, false, true,"
            " NULL, NULL, NULL, NULL, NULL, NULL, 0"
        )
    until = ":far" if kind is Kind.DONE else ":now"
    return (
        f"SELECT {ident}, '{TASK}', 'done', {until}, false, 1, NULL, 0, true, true,"
        f" '{{}}', '1', :now, {until}, NULL, true, 0"
    )


_JOB_COLUMNS = (
    "item_id, task, status, due_at, ready, attempt, owner, niceness, ever_run, selected,"
    " result, result_version, result_at, expires_at, ttl, succeeded, fail_count"
)


def _statements(kind: Kind, ident: str) -> list[str]:
    data = "'{\"n\":' || g || '}'"
    return [
        f"INSERT INTO items (id, data, created_by, created_at, updated_at)"
        f" SELECT {ident}, {data}, NULL, :now, :now FROM s",
        f"INSERT INTO aliases (alias, item_id) SELECT {ident}, {ident} FROM s",
        f"INSERT INTO tags (item_id, name, value) SELECT {ident}, '{TAG}', NULL FROM s",
        f"INSERT INTO jobs ({_JOB_COLUMNS}) {_jobs_select(kind, ident)} FROM s",
    ]


def seed(conn: Any, backend: str, batches: list[tuple[Kind, int, int]]) -> None:
    """Insert, per ``(kind, first, count)``, items ``bench:<n>`` for n from *first* with their
    ``noop`` job. Secondary indexes are dropped first and rebuilt after (a sort is much faster
    than a million index insertions); PostgreSQL skips the foreign-key triggers (the rows are
    consistent by construction)."""
    now = time.time()
    with _without_indexes(conn, backend):
        for kind, first, count in batches:
            for lo in range(first, first + count, CHUNK):
                hi = min(first + count, lo + CHUNK) - 1
                if backend == "sqlite":
                    _seed_sqlite(conn, kind, lo, hi, now)
                else:
                    _seed_postgres(conn, kind, lo, hi, now)


@contextlib.contextmanager
def _without_indexes(conn: Any, backend: str) -> Iterator[None]:
    if backend == "sqlite":
        rows = conn.execute(_SQLITE_INDEXES).fetchall()
    else:
        conn.execute("SET session_replication_role = replica")
        conn.execute("SET maintenance_work_mem = '256MB'")
        rows = conn.execute(_POSTGRES_INDEXES).fetchall()
    drops = [f"DROP INDEX {name}" for name, _ in rows]
    creates = [sql for _, sql in rows]
    if backend != "sqlite":
        drops.append("ALTER TABLE jobs DROP CONSTRAINT jobs_item_task")
        creates.append("ALTER TABLE jobs ADD CONSTRAINT jobs_item_task UNIQUE (item_id, task)")
    _run_all(conn, backend, drops)
    yield
    _run_all(conn, backend, creates)
    if backend != "sqlite":
        conn.execute("RESET session_replication_role")
        conn.commit()


_SQLITE_INDEXES = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    " AND tbl_name IN ('items', 'aliases', 'tags', 'jobs')"
)
_POSTGRES_INDEXES = (
    "SELECT i.indexname, i.indexdef FROM pg_indexes i"
    " WHERE i.schemaname = current_schema() AND i.tablename IN ('items', 'aliases', 'tags', 'jobs')"
    " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)"
)


def _run_all(conn: Any, backend: str, statements: list[str]) -> None:
    if backend == "sqlite":
        conn.execute("BEGIN IMMEDIATE")
    for statement in statements:
        conn.execute(statement)
    if backend == "sqlite":
        conn.execute("COMMIT")
    else:
        conn.commit()


def _seed_sqlite(conn: Any, kind: Kind, lo: int, hi: int, now: float) -> None:
    series = "WITH RECURSIVE s(g) AS (SELECT :lo UNION ALL SELECT g + 1 FROM s WHERE g < :hi) "
    params = {"lo": lo, "hi": hi, "now": now, "far": now + FAR}
    conn.execute("BEGIN IMMEDIATE")
    for statement in _statements(kind, "'bench:' || g"):
        head, _, select = statement.partition(" SELECT ")
        conn.execute(f"{head} {series} SELECT {select}", params)
    conn.execute("COMMIT")


def _seed_postgres(conn: Any, kind: Kind, lo: int, hi: int, now: float) -> None:
    params = {"lo": lo, "hi": hi, "now": now, "far": now + FAR}
    series = "WITH s(g) AS (SELECT generate_series(%(lo)s::bigint, %(hi)s::bigint)) "
    for statement in _statements(kind, "'bench:' || g"):
        text = statement.replace(":now", "%(now)s").replace(":far", "%(far)s")
        conn.execute(series + text, params)
    conn.commit()


def analyze(conn: Any, backend: str) -> None:
    """PostgreSQL: the statistics and visibility map autovacuum would have made by now.
    SQLite has no automatic ANALYZE, so it gets none (what a user's database has)."""
    if backend == "sqlite":
        return
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE")
    conn.autocommit = False
