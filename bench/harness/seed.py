"""Fast set-up: rows straight into items, aliases, tags and jobs with bulk SQL (not timed).

The rows are the ones ``Store.add_items`` makes for an item tagged ``noop`` (or, for
``DONE``, what a successful commit leaves with a TTL far in the future), minus the journal
rows of their creation, which no benchmark reads.

Item ``bench:<n>`` (n zero-padded to nine digits, so ids arrive in key order and
primary-key inserts append) has job id n. Secondary indexes are dropped first and rebuilt
after (a sort is much faster than a million index insertions). PostgreSQL skips the
foreign-key triggers (the rows are consistent by construction) and fills the four tables
two at a time on two connections, then gets ``VACUUM ANALYZE`` (what autovacuum would have
done by then); SQLite writes without a journal meanwhile (the database is new: nothing to
roll back to), is back in WAL mode after, and gets no ``ANALYZE``, as a user's database
has none.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from harness.backends import Backend

TAG = "noop"
TASK = "noop"
FAR = 10 * 365 * 86400.0  # a TTL that never passes during a run
CHUNK = 1_000_000

Batch = tuple["Kind", int, int]  # (kind, first n, count)


class Kind(enum.Enum):
    DUE = "due"  # queued, never run, due now: what a worker will claim
    DONE = "done"  # done, result fresh for ten years: present but not due
    EXPIRED = "expired"  # done, its TTL just passed: due, waiting in jobs_pending


def fill(backend: Backend, url: str, batches: Sequence[Batch]) -> None:
    """Insert, per ``(kind, first, count)``, items for n from *first* with their ``noop``
    job into the (migrated, empty) database at *url*."""
    if backend.dialect == "sqlite":
        _fill_sqlite(backend, url, batches)
    else:
        _fill_postgres(backend, url, batches)


def _jobs_select(kind: Kind, ident: str) -> str:
    if kind is Kind.DUE:
        return (
            f"SELECT g, {ident}, '{TASK}', 'queued', :now, true, 0, NULL, 0, false, true,"
            " NULL, NULL, NULL, NULL, NULL, NULL, 0"
        )
    until = ":far" if kind is Kind.DONE else ":now"
    return (
        f"SELECT g, {ident}, '{TASK}', 'done', {until}, false, 1, NULL, 0, true, true,"
        f" '{{}}', '1', :now, {until}, NULL, true, 0"
    )


_JOB_COLUMNS = (
    "id, item_id, task, status, due_at, ready, attempt, owner, niceness, ever_run, selected,"
    " result, result_version, result_at, expires_at, ttl, succeeded, fail_count"
)


def _statements(kind: Kind, ident: str) -> list[str]:
    """items, aliases, tags, jobs: each ``INSERT ... SELECT ... FROM s`` over the series."""
    data = "'{\"n\":' || g || '}'"
    return [
        f"INSERT INTO items (id, data, created_by, created_at, updated_at)"
        f" SELECT {ident}, {data}, NULL, :now, :now FROM s",
        f"INSERT INTO aliases (alias, item_id) SELECT {ident}, {ident} FROM s",
        f"INSERT INTO tags (item_id, name, value) SELECT {ident}, '{TAG}', NULL FROM s",
        f"INSERT INTO jobs ({_JOB_COLUMNS}) {_jobs_select(kind, ident)} FROM s",
    ]


def _chunks(batches: Sequence[Batch]) -> Iterator[tuple[Kind, int, int]]:
    """(kind, lo, hi) ranges of at most CHUNK rows (hi included)."""
    for kind, first, count in batches:
        for lo in range(first, first + count, CHUNK):
            yield kind, lo, min(first + count, lo + CHUNK) - 1


# -- SQLite ------------------------------------------------------------------------------

_SQLITE_INDEXES = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    " AND tbl_name IN ('items', 'aliases', 'tags', 'jobs')"
)
_SQLITE_SERIES = "WITH RECURSIVE s(g) AS (SELECT :lo UNION ALL SELECT g + 1 FROM s WHERE g < :hi) "


def _fill_sqlite(backend: Backend, url: str, batches: Sequence[Batch]) -> None:
    conn = backend.raw(url)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        indexes = conn.execute(_SQLITE_INDEXES).fetchall()
        _in_transaction(conn, [f"DROP INDEX {name}" for name, _ in indexes])
        now = time.time()
        for kind, lo, hi in _chunks(batches):
            params = {"lo": lo, "hi": hi, "now": now, "far": now + FAR}
            conn.execute("BEGIN IMMEDIATE")
            for statement in _statements(kind, "'bench:' || printf('%09d', g)"):
                head, _, select = statement.partition(" SELECT ")
                conn.execute(f"{head} {_SQLITE_SERIES} SELECT {select}", params)
            conn.execute("COMMIT")
        _in_transaction(conn, [sql for _, sql in indexes])
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()


def _in_transaction(conn: Any, statements: list[str]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    for statement in statements:
        conn.execute(statement)
    conn.execute("COMMIT")


# -- PostgreSQL --------------------------------------------------------------------------

_POSTGRES_INDEXES = (
    "SELECT i.indexname, i.indexdef FROM pg_indexes i"
    " WHERE i.schemaname = current_schema() AND i.tablename IN ('items', 'aliases', 'tags', 'jobs')"
    " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)"
)
_POSTGRES_SERIES = "WITH s(g) AS (SELECT generate_series(%(lo)s::bigint, %(hi)s::bigint)) "
_UNIQUE = "jobs_item_task UNIQUE (item_id, task)"


def _fill_postgres(backend: Backend, url: str, batches: Sequence[Batch]) -> None:
    conns = [backend.raw(url), backend.raw(url)]
    try:
        for conn in conns:
            conn.execute("SET session_replication_role = replica")
            conn.execute("SET maintenance_work_mem = '256MB'")
        first = conns[0]
        indexes = first.execute(_POSTGRES_INDEXES).fetchall()
        drops = [f"DROP INDEX {name}" for name, _ in indexes]
        _commit(first, [*drops, f"ALTER TABLE jobs DROP CONSTRAINT {_UNIQUE.split()[0]}"])
        now = time.time()
        for kind, lo, hi in _chunks(batches):
            statements = [
                _POSTGRES_SERIES + s.replace(":now", "%(now)s").replace(":far", "%(far)s")
                for s in _statements(kind, "'bench:' || lpad(CAST(g AS text), 9, '0')")
            ]
            params = {"lo": lo, "hi": hi, "now": now, "far": now + FAR}
            # items and aliases on one connection, tags and jobs on the other, at once
            _parallel([(conns[0], statements[:2], params), (conns[1], statements[2:], params)])
        # jobs' indexes on one connection, the other tables' on the other (an index build
        # locks its table against the ADD CONSTRAINT, so one table stays on one connection)
        on_jobs = [sql for name, sql in indexes if name.startswith("jobs_")]
        others = [sql for name, sql in indexes if not name.startswith("jobs_")]
        on_jobs.append(f"ALTER TABLE jobs ADD CONSTRAINT {_UNIQUE}")
        _parallel([(conns[0], others, {}), (conns[1], on_jobs, {})])
        first.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), max(id)) FROM jobs")
        first.commit()
        first.autocommit = True
        first.execute("VACUUM ANALYZE")
    finally:
        for conn in conns:
            conn.close()


def _commit(conn: Any, statements: list[str], params: dict[str, Any] | None = None) -> None:
    for statement in statements:
        conn.execute(statement, params or None)
    conn.commit()


def _parallel(work: list[tuple[Any, list[str], dict[str, Any]]]) -> None:
    """Each (connection, statements, params) in a thread of its own; re-raise any error."""
    errors: list[BaseException] = []

    def run(conn: Any, statements: list[str], params: dict[str, Any]) -> None:
        try:
            _commit(conn, statements, params)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=item) for item in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
