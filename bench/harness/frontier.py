"""A crawl with a big frontier, made by bulk SQL (not timed): what ``bench/frontier`` starts from.

The crawl itself is created the way ``trawl crawl`` creates it (``operations.create``: the
crawl row, its first ruleset, its seed page); then, per host ``hNNNNNN.frontier.test``, the
rows a crawl that had fetched the host's root page and found its pages would hold:

- the root ``http://<host>/``: depth 0, done (its job leased once and committed, no TTL),
  with its attempt row;
- the host's pages ``http://<host>/page/<j>``: depth 1, found through the root (a
  ``crawl_links`` row each), queued and due (their ``trawl.fetch`` job never run);
- the host's politeness row (``crawl_hosts``) and its robots.txt, fetched a moment ago and
  absent (404: everything allowed), as ``crawl_robots`` keeps it.

Every page is an item ``page:<crawl>:<url>`` with ``{"crawl", "url"}`` data, its own alias,
the ``trawl.page`` tag and its job, exactly as ``Store.add_items`` writes them, minus their
creation journal rows (nothing reads them; ``harness/seed.py`` leaves them out too). Rows go
in host by host (so primary keys mostly append), but the pages' ``due_at`` interleave the
hosts (page *j* of every host before page *j+1* of any): a crawl's frontier holds what was
found over time, and claiming it in ``due_at`` order visits host after host, as a broad
crawl does.

As in ``seed.py``: secondary indexes are dropped first and rebuilt after, foreign-key
triggers are off (the rows are consistent by construction), two connections fill the tables
at once, then ``VACUUM ANALYZE``; SQLite is filled by one connection without a journal
(the file is new) and gets no ``ANALYZE``, as a user's database has none.
"""

from __future__ import annotations

import re
import time
from typing import Any

from harness.seed import _commit, _parallel
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.options import Options
from trawl.store import migrate
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

DOMAIN = "frontier.test"
ACCEPT = r"^http://h\d{6}\.frontier\.test/"  # every host of the bench, no other
CHUNK = 1_000_000  # pages per statement
TABLES = (
    "items",
    "aliases",
    "tags",
    "jobs",
    "crawl_pages",
    "crawl_links",
    "crawl_hosts",
    "crawl_robots",
    "crawl_attempts",
)


def host_name(h: int) -> str:
    return f"h{h:06d}.{DOMAIN}"


def create_crawl(url: str, *, concurrency: int, warc: str) -> int:
    """Migrate, register ``trawl.fetch`` and create the crawl as ``trawl crawl`` does."""
    store = Store(url)
    try:
        migrate.upgrade(store.db)
        operations.register(store, make_app().get(FETCH_TASK).info())
        spec = operations.CrawlSpec(
            seeds=(f"http://{host_name(0)}/",),
            accept=(ACCEPT,),
            concurrency=concurrency,
            options=Options(warc=warc),
        )
        return operations.create(store, spec)
    finally:
        store.close()


# -- the rows, as SELECTs over s(g): g numbers the pages host by host ------------------------

_HOST = "'h' || lpad(CAST(h AS text), 6, '0') || '.{domain}'"


def _series(per_host: int) -> str:
    """s(g, h, j, host, url, id): page g is page j of host h."""
    host = _HOST.format(domain=DOMAIN)
    return (
        "WITH s AS (SELECT g, h, j, host, 'http://' || host || '/page/' || j AS url"
        " FROM (SELECT g, g / {per} AS h, g %% {per} AS j FROM"
        " generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g) AS n,"
        f" LATERAL (SELECT {host} AS host) AS x),"
        " p AS (SELECT s.*, %(prefix)s || url AS id, %(prefix)s || 'http://' || host || '/'"
        " AS root_id, 'http://' || host || '/' AS root FROM s) "
    ).replace("{per}", str(per_host))


def _roots_series() -> str:
    """r(h, host, url, id): the root page of host h."""
    host = _HOST.format(domain=DOMAIN)
    return (
        "WITH r0 AS (SELECT h, host, 'http://' || host || '/' AS url FROM"
        " generate_series(%(lo)s::bigint, %(hi)s::bigint) AS h,"
        f" LATERAL (SELECT {host} AS host) AS x),"
        " r AS (SELECT r0.*, %(prefix)s || url AS id FROM r0) "
    )


_DATA = "'{\"crawl\":' || %(crawl)s || ',\"url\":\"' || url || '\"}'"

PAGE_STATEMENTS = (
    # connection 1
    (
        "INSERT INTO items (id, data, created_by, created_at, updated_at)"
        f" SELECT id, {_DATA}, root_id, %(now)s, %(now)s FROM p",
        "INSERT INTO aliases (alias, item_id) SELECT id, id FROM p",
        "INSERT INTO crawl_pages (crawl_id, url, item_id, depth, via, skip, found_at)"
        " SELECT %(crawl)s, url, id, 1, root, NULL, %(now)s FROM p",
    ),
    # connection 2
    (
        "INSERT INTO tags (item_id, name, value) SELECT id, 'trawl.page', NULL FROM p",
        # due_at: page j of every host before page j+1 of any, a millisecond apart
        "INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,"
        " selected, fail_count, source_update)"
        f" SELECT id, '{FETCH_TASK}', 'queued',"
        " %(now)s - (%(total)s - (j * %(hosts)s + h)) * 0.001, true, 0, 0, false, true, 0, NULL"
        " FROM p",
        "INSERT INTO crawl_links (crawl_id, parent, child, hops) SELECT %(crawl)s, root, url, 1"
        " FROM p",
    ),
)

ROOT_STATEMENTS = (
    (
        "INSERT INTO items (id, data, created_by, created_at, updated_at)"
        f" SELECT id, {_DATA}, NULL, %(now)s, %(now)s FROM r",
        "INSERT INTO aliases (alias, item_id) SELECT id, id FROM r",
        "INSERT INTO crawl_pages (crawl_id, url, item_id, depth, via, skip, found_at)"
        " SELECT %(crawl)s, url, id, 0, NULL, NULL, %(now)s FROM r",
        "INSERT INTO crawl_hosts (host, next_at, blocked_until, errors, errors_since)"
        " SELECT host, 0, NULL, 0, NULL FROM r",
    ),
    (
        "INSERT INTO tags (item_id, name, value) SELECT id, 'trawl.page', NULL FROM r",
        "INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,"
        " selected, result, result_version, result_at, expires_at, ttl, succeeded, fail_count)"
        f" SELECT id, '{FETCH_TASK}', 'done', NULL, false, 1, 0, true, true, 'null', %(version)s,"
        " %(now)s, NULL, NULL, true, 0 FROM r",
        "INSERT INTO crawl_robots (host, status, body, fetched_at) SELECT host, 404, '', %(now)s"
        " FROM r",
        "INSERT INTO crawl_attempts (crawl_id, url, attempt, ruleset, host, started_at, elapsed,"
        " outcome, status_code, content_type, size, outlinks, warc_file, warc_offset,"
        " warc_length) SELECT %(crawl)s, url, 1, 1, host, %(now)s - 3600, 0.01, 'done', 200,"
        " 'text/html', 2000, %(per_host)s, 'seeded.warc.gz', 0, 0 FROM r",
    ),
)

_INDEXES = (
    "SELECT i.indexname, i.indexdef FROM pg_indexes i"
    " WHERE i.schemaname = current_schema() AND i.tablename = ANY(%(tables)s)"
    " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)"
)
_UNIQUE = "jobs_item_task UNIQUE (item_id, task)"


def fill(backend: Any, url: str, crawl_id: int, pages: int, per_host: int) -> int:
    """Add *pages* due pages, *per_host* a host, with their hosts' done roots; returns the
    number of hosts."""
    hosts = (pages + per_host - 1) // per_host
    if backend.dialect == "sqlite":
        _fill_sqlite(backend, url, crawl_id, pages, per_host, hosts)
    else:
        _fill_postgres(backend, url, crawl_id, pages, per_host, hosts)
    return hosts


def _params(crawl_id: int, pages: int, per_host: int, hosts: int, version: str) -> dict[str, Any]:
    return {
        "crawl": crawl_id,
        "prefix": f"page:{crawl_id}:",
        "now": time.time(),
        "total": pages,
        "hosts": hosts,
        "per_host": per_host,
        "version": version,
    }


def _fill_postgres(
    backend: Any, url: str, crawl_id: int, pages: int, per_host: int, hosts: int
) -> None:
    conns = [backend.raw(url), backend.raw(url)]
    try:
        # the seed page operations.create made is host 0's root: the bulk rows bring it
        # (deleted before the triggers go off, so its rows go with it)
        _commit(conns[0], [f"DELETE FROM items WHERE id LIKE 'page:{crawl_id}:%'"])
        for conn in conns:
            conn.execute("SET session_replication_role = replica")
            conn.execute("SET maintenance_work_mem = '256MB'")
        first = conns[0]
        indexes = first.execute(_INDEXES, {"tables": list(TABLES)}).fetchall()
        drops = [f"DROP INDEX {name}" for name, _ in indexes]
        _commit(first, [*drops, f"ALTER TABLE jobs DROP CONSTRAINT {_UNIQUE.split()[0]}"])
        base = _params(crawl_id, pages, per_host, hosts, _fetch_version(first))
        _run(conns, ROOT_STATEMENTS, _roots_series(), base | {"lo": 0, "hi": hosts - 1})
        for lo in range(0, pages, CHUNK):
            params = base | {"lo": lo, "hi": min(pages, lo + CHUNK) - 1}
            _run(conns, PAGE_STATEMENTS, _series(per_host), params)
        jobs = [sql for name, sql in indexes if name.startswith("jobs_")]
        others = [sql for name, sql in indexes if not name.startswith("jobs_")]
        jobs.append(f"ALTER TABLE jobs ADD CONSTRAINT {_UNIQUE}")
        _parallel([(conns[0], others, {}), (conns[1], jobs, {})])
        first.autocommit = True
        first.execute("VACUUM ANALYZE")
    finally:
        for conn in conns:
            conn.close()


# -- SQLite: one connection, no journal while filling (the file is new), no ANALYZE --------

_SQLITE_HOST = "'h' || printf('%06d', h) || '." + DOMAIN + "'"
_SQLITE_INDEXES = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    f" AND tbl_name IN ({', '.join(repr(t) for t in TABLES)})"
)


def _sqlite_series(per_host: int) -> str:
    return (
        "WITH RECURSIVE n(g) AS (SELECT :lo UNION ALL SELECT g + 1 FROM n WHERE g < :hi),"
        f" s0 AS (SELECT g, g / {per_host} AS h, g % {per_host} AS j FROM n),"
        f" s AS (SELECT g, h, j, {_SQLITE_HOST} AS host FROM s0),"
        " p AS (SELECT g, h, j, host, 'http://' || host || '/page/' || j AS url,"
        " :prefix || 'http://' || host || '/page/' || j AS id,"
        " :prefix || 'http://' || host || '/' AS root_id, 'http://' || host || '/' AS root"
        " FROM s) "
    )


_SQLITE_ROOTS = (
    "WITH RECURSIVE n(h) AS (SELECT :lo UNION ALL SELECT h + 1 FROM n WHERE h < :hi),"
    f" r0 AS (SELECT h, {_SQLITE_HOST} AS host FROM n),"
    " r AS (SELECT h, host, 'http://' || host || '/' AS url,"
    " :prefix || 'http://' || host || '/' AS id FROM r0) "
)


def _sqlite(statement: str) -> str:
    """A statement above in SQLite's parameter style."""
    return re.sub(r"%\((\w+)\)s", r":\1", statement).replace("%%", "%")


def _fill_sqlite(
    backend: Any, url: str, crawl_id: int, pages: int, per_host: int, hosts: int
) -> None:
    conn = backend.raw(url)
    try:
        _seed_rows_gone(conn, crawl_id)
        conn.execute("PRAGMA journal_mode=OFF")
        indexes = conn.execute(_SQLITE_INDEXES).fetchall()
        _sqlite_transaction(conn, [(f"DROP INDEX {name}", {}) for name, _ in indexes])
        version = conn.execute("SELECT version FROM tasks WHERE name = ?", (FETCH_TASK,))
        base = _params(crawl_id, pages, per_host, hosts, str(version.fetchone()[0]))
        roots = [s for group in ROOT_STATEMENTS for s in group]
        params = base | {"lo": 0, "hi": hosts - 1}
        _sqlite_transaction(conn, [(_SQLITE_ROOTS + _sqlite(s), params) for s in roots])
        series = _sqlite_series(per_host)
        for lo in range(0, pages, CHUNK):
            params = base | {"lo": lo, "hi": min(pages, lo + CHUNK) - 1}
            work = [(series + _sqlite(s), params) for group in PAGE_STATEMENTS for s in group]
            _sqlite_transaction(conn, work)
        _sqlite_transaction(conn, [(sql, {}) for _, sql in indexes])
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()


def _seed_rows_gone(conn: Any, crawl_id: int) -> None:
    """The seed page operations.create made, every row of it (no cascade: foreign keys are
    not enforced on this connection)."""
    like = f"page:{crawl_id}:%"
    statements = [
        (f"DELETE FROM {table} WHERE {column} LIKE :like", {"like": like})
        for table, column in (
            ("tags", "item_id"),
            ("aliases", "item_id"),
            ("jobs", "item_id"),
            ("crawl_pages", "item_id"),
            ("items", "id"),
        )
    ]
    _sqlite_transaction(conn, statements)


def _sqlite_transaction(conn: Any, statements: list[tuple[str, dict[str, Any]]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    for statement, params in statements:
        conn.execute(statement, params)
    conn.execute("COMMIT")


def _run(conns: list[Any], statements: Any, series: str, params: dict[str, Any]) -> None:
    pairs = zip(conns, statements, strict=True)
    work = [(c, [series + s for s in group], params) for c, group in pairs]
    _parallel(work)


def _fetch_version(conn: Any) -> str:
    """The version a commit of ``trawl.fetch`` records with its result."""
    row = conn.execute("SELECT version FROM tasks WHERE name = %s", (FETCH_TASK,)).fetchone()
    return str(row[0])
