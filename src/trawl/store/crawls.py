"""The crawl tables: crawls, rulesets, pages, links, attempts, payloads, politeness, robots.

Query-shaped verbs only; what they mean (depth, rules, politeness) is in ``trawl.crawl``.
Every verb runs inside the caller's transaction unless it says otherwise.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import TextClause

from trawl.model.records import NewItem
from trawl.store import bulk, codec
from trawl.store.connection import Database
from trawl.store.sql import q

FETCH_TASK = "trawl.fetch"


@dataclass(frozen=True, kw_only=True, slots=True)
class CrawlRow:
    id: int
    spec: str | None
    seeds: list[str]
    depth_limit: int | None
    niceness: int
    concurrency: int
    tag: str | None
    created_by: str | None
    note: str | None
    aborted: bool
    ruleset: int
    options: dict[str, Any]
    created_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class PageRow:
    url: str
    item_id: str
    depth: int
    via: str | None
    skip: str | None


_CRAWL_COLUMNS = (
    "id, spec, seeds, depth_limit, niceness, concurrency, tag, created_by, note, aborted,"
    " ruleset, options, created_at"
)
_INSERT_CRAWL = q(
    "INSERT INTO crawls (spec, seeds, depth_limit, niceness, concurrency, tag, created_by,"
    " note, aborted, ruleset, options, created_at) VALUES (:spec, :seeds, :depth_limit,"
    " :niceness, :concurrency, :tag, :created_by, :note, false, 0, :options, :now)"
    " RETURNING id"
)
_CRAWL = q(f"SELECT {_CRAWL_COLUMNS} FROM crawls WHERE id = :id")
_CRAWL_LOCKED = q(f"SELECT {_CRAWL_COLUMNS} FROM crawls WHERE id = :id FOR UPDATE")
_CRAWLS = q(f"SELECT {_CRAWL_COLUMNS} FROM crawls ORDER BY id")
_NEWEST = q(f"SELECT {_CRAWL_COLUMNS} FROM crawls WHERE id < :before ORDER BY id DESC LIMIT :limit")
_BY_SPEC = q(f"SELECT {_CRAWL_COLUMNS} FROM crawls WHERE spec = :spec ORDER BY id DESC")
_SET = "UPDATE crawls SET {column} = :value WHERE id = :id"

_INSERT_RULESET = q(
    "INSERT INTO crawl_rulesets (crawl_id, version, rules, created_at, note)"
    " VALUES (:crawl, :version, :rules, :now, :note) ON CONFLICT DO NOTHING RETURNING version"
)
_RULESET = q("SELECT rules FROM crawl_rulesets WHERE crawl_id = :crawl AND version = :version")

_PAGE = q(
    "SELECT url, item_id, depth, via, skip FROM crawl_pages WHERE crawl_id = :crawl AND url = :url"
)
_PAGE_LOCKED = q(
    "SELECT url, item_id, depth, via, skip FROM crawl_pages"
    " WHERE crawl_id = :crawl AND url = :url FOR UPDATE"
)
_LOWER = q(
    "UPDATE crawl_pages SET depth = :depth, via = :via"
    " WHERE crawl_id = :crawl AND url = :url AND depth > :depth"
    " RETURNING url, item_id, skip"
)
_INSERT_PAGES = "INSERT INTO crawl_pages (crawl_id, url, item_id, depth, via, skip, found_at) {}"
_INSERT_PAGES_SQLITE = q(
    _INSERT_PAGES.format(
        "SELECT :crawl, value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, :now"
        " FROM json_each(:rows) WHERE true ON CONFLICT DO NOTHING RETURNING url"
    )
)
_INSERT_PAGES_POSTGRES = q(
    _INSERT_PAGES.format(
        "SELECT :crawl, u, i, d, v, s, :now FROM unnest(CAST(:urls AS text[]),"
        " CAST(:items AS text[]), CAST(:depths AS int[]), CAST(:vias AS text[]),"
        " CAST(:skips AS text[])) AS t(u, i, d, v, s) ON CONFLICT DO NOTHING RETURNING url"
    )
)
_PAGES_OF = (
    "SELECT url, item_id, depth, via, skip FROM crawl_pages WHERE crawl_id = :crawl AND url {}"
)
_PAGES_OF_SQLITE = q(_PAGES_OF.format("IN (SELECT value FROM json_each(:urls))"))
_PAGES_OF_POSTGRES = q(_PAGES_OF.format("= ANY(:urls)"))
_PAGES_OF_LOCKED = q(_PAGES_OF.format("= ANY(:urls) ORDER BY url FOR UPDATE"))
_CHILDREN = (
    "SELECT l.parent, l.child, l.hops, p.depth FROM crawl_links l"
    " JOIN crawl_pages p ON p.crawl_id = l.crawl_id AND p.url = l.child"
    " WHERE l.crawl_id = :crawl AND l.parent {}"
)
_CHILDREN_SQLITE = q(_CHILDREN.format("IN (SELECT value FROM json_each(:parents))"))
_CHILDREN_POSTGRES = q(_CHILDREN.format("= ANY(:parents)"))
_SET_SKIP = q("UPDATE crawl_pages SET skip = :skip WHERE crawl_id = :crawl AND url = :url")
# A link found again with fewer hops (a redirect where a link was) keeps the fewer: depth
# carried down through it must be the shortest.
_LINK_CONFLICT = (
    " ON CONFLICT (crawl_id, parent, child) DO UPDATE SET hops = excluded.hops"
    " WHERE crawl_links.hops > excluded.hops"
)
# On SQLite a batch's rows go as one JSON array to one statement, not as an executemany:
# sqlite3 drops the GIL around each row's step and must take it back from the event
# loop's thread, busy with pages, so in a crawl a row cost 72-110 us on average (17-24 us
# at the median) against 3-5 us alone.
_INSERT_LINKS_SQLITE = q(
    "INSERT INTO crawl_links (crawl_id, parent, child, hops) SELECT :crawl, value ->> 0,"
    f" value ->> 1, value ->> 2 FROM json_each(:rows) WHERE true{_LINK_CONFLICT}"
)
# On PostgreSQL many rows go as arrays in one statement: a statement per row, even in one
# pipeline, costs the server a parse-bind-execute each.
_INSERT_LINKS_POSTGRES = q(
    "INSERT INTO crawl_links (crawl_id, parent, child, hops) SELECT :crawl, p, c, h FROM"
    " unnest(CAST(:parents AS text[]), CAST(:children AS text[]), CAST(:hops AS int[]))"
    f" AS t(p, c, h){_LINK_CONFLICT}"
)

_JOBS_SKIP = (
    "UPDATE jobs SET status = 'skipped', due_at = NULL, ready = false"
    f" WHERE item_id {{}} AND task = '{FETCH_TASK}' AND status <> 'running'"
)
_JOBS_SKIP_SQLITE = q(_JOBS_SKIP.format("IN (SELECT value FROM json_each(:ids))"))
_JOBS_SKIP_POSTGRES = q(_JOBS_SKIP.format("= ANY(:ids)"))
_JOBS_UNSKIP = (
    "UPDATE jobs SET status = 'queued', due_at = :now, ready = true, waiting = NULL"
    f" WHERE item_id {{}} AND task = '{FETCH_TASK}' AND status = 'skipped'"
)
_JOBS_UNSKIP_SQLITE = q(_JOBS_UNSKIP.format("IN (SELECT value FROM json_each(:ids))"))
_JOBS_UNSKIP_POSTGRES = q(_JOBS_UNSKIP.format("= ANY(:ids)"))
_CRAWL_ITEMS = "SELECT item_id FROM crawl_pages WHERE crawl_id = :crawl"
_PARK = q(
    "UPDATE jobs SET due_at = NULL, ready = false, waiting = 'crawl-aborted'"
    f" WHERE task = '{FETCH_TASK}' AND item_id IN ({_CRAWL_ITEMS})"
    " AND status IN ('queued', 'failed') AND due_at IS NOT NULL"
)
_PARK_ONE = q(
    "UPDATE jobs SET due_at = NULL, ready = false, waiting = 'crawl-aborted'"
    f" WHERE task = '{FETCH_TASK}' AND item_id = :item_id AND status IN ('queued', 'failed')"
)
_UNPARK = q(
    "UPDATE jobs SET due_at = :now, ready = true, waiting = NULL"
    f" WHERE task = '{FETCH_TASK}' AND waiting = 'crawl-aborted'"
    f" AND item_id IN ({_CRAWL_ITEMS})"
)
_NICE = q(
    f"UPDATE jobs SET niceness = :niceness WHERE task = '{FETCH_TASK}'"
    f" AND item_id IN ({_CRAWL_ITEMS})"
)

_ATTEMPT_COLUMNS = (
    "crawl_id, url, attempt, ruleset, host, started_at, elapsed, outcome, status_code,"
    " location, content_type, size, outlinks, outlinks_cut, error, digest, warc_file,"
    " warc_offset, warc_length, subrequests, screenshot_file, screenshot_offset,"
    " screenshot_length, script_result"
)
_ATTEMPT_FIELDS = tuple(name.strip() for name in _ATTEMPT_COLUMNS.split(","))
_INSERT_ATTEMPTS_SQLITE = q(
    f"INSERT INTO crawl_attempts ({_ATTEMPT_COLUMNS}) SELECT "
    + ", ".join(f"value ->> {n}" for n in range(len(_ATTEMPT_FIELDS)))
    + " FROM json_each(:rows)"
)
_INSERT_ATTEMPTS_POSTGRES = q(
    f"INSERT INTO crawl_attempts ({_ATTEMPT_COLUMNS}) SELECT {_ATTEMPT_COLUMNS}"
    " FROM json_populate_recordset(NULL::crawl_attempts, CAST(:rows AS json))"
)
# What an attempt not rendered in a browser records of it: nothing.
_BROWSER_FIELDS = dict.fromkeys(
    ("subrequests", "screenshot_file", "screenshot_offset", "screenshot_length", "script_result")
)
_INSERT_PAYLOADS_SQLITE = q(
    "INSERT INTO crawl_payloads (crawl_id, digest, url, date) SELECT value ->> 0, value ->> 1,"
    " value ->> 2, value ->> 3 FROM json_each(:rows) WHERE true ON CONFLICT DO NOTHING"
)
_INSERT_PAYLOADS_POSTGRES = q(
    "INSERT INTO crawl_payloads (crawl_id, digest, url, date) SELECT * FROM"
    " unnest(CAST(:crawls AS bigint[]), CAST(:digests AS text[]), CAST(:urls AS text[]),"
    " CAST(:dates AS text[])) ON CONFLICT DO NOTHING"
)
_PAYLOADS = q("SELECT digest, url, date FROM crawl_payloads WHERE crawl_id = :crawl")
_PAYLOADS_OF = "SELECT digest, url, date FROM crawl_payloads WHERE crawl_id = :crawl AND digest"
_PAYLOADS_OF_SQLITE = q(f"{_PAYLOADS_OF} IN (SELECT value FROM json_each(:digests))")
_PAYLOADS_OF_POSTGRES = q(f"{_PAYLOADS_OF} = ANY(:digests)")

_HOST_INIT = q(
    "INSERT INTO crawl_hosts (host, next_at, blocked_until) VALUES (:host, 0, NULL)"
    " ON CONFLICT DO NOTHING"
)
_HOST = q("SELECT next_at, blocked_until, errors FROM crawl_hosts WHERE host = :host")
_HOST_LOCKED = q(
    "SELECT next_at, blocked_until, errors FROM crawl_hosts WHERE host = :host FOR UPDATE"
)
# One more consecutive error, unless the host is already backing off: requests planned
# before the block began fail together, and count as one.
_HOST_ERROR = q(
    "UPDATE crawl_hosts SET errors = errors + 1, errors_since = COALESCE(errors_since, :now)"
    " WHERE host = :host AND (blocked_until IS NULL OR blocked_until <= :now) RETURNING host"
)
_HOST_ERRORS = q("SELECT errors, errors_since, blocked_until FROM crawl_hosts WHERE host = :host")
# A page's last attempt failed at host level: no answer (timeout, connection), or a 5xx.
_FAILED_LAST = q(
    "SELECT outcome = 'retry' AND (status_code IS NULL OR status_code >= 500)"
    " FROM crawl_attempts WHERE crawl_id = :crawl_id AND url = :url ORDER BY id DESC LIMIT 1"
)
_FAIL_COUNT = q(f"SELECT fail_count FROM jobs WHERE item_id = :item_id AND task = '{FETCH_TASK}'")
_HOST_OK = q(
    "UPDATE crawl_hosts SET errors = 0, errors_since = NULL WHERE host = :host AND errors > 0"
)
_HOST_NEXT = q("UPDATE crawl_hosts SET next_at = :next_at WHERE host = :host")
_HOST_BLOCK = q(
    "UPDATE crawl_hosts SET blocked_until = :until WHERE host = :host"
    " AND (blocked_until IS NULL OR blocked_until < :until)"
)
# A slot ``s`` counts while its page's job is still running the attempt that took it. The job
# is looked up for each slot, by its key, in a scalar subquery, which the planner never
# turns into a join: joined, PostgreSQL's statistics (taken while few jobs were running)
# made it start from the running jobs through ``jobs_task_status``, walking the dead
# 'running' entry every fetch leaves there until jobs is vacuumed - at every reservation,
# 4 ms a fetch 60,000 pages into a crawl on a server without autovacuum.
# The task is compared as ``task || ''``, an expression no index holds, so the lookup can
# only go by item through ``jobs_item_task``: with ``task = ...`` both it and
# ``jobs_task_status`` (task, status) match, and a plan made while jobs had no statistics
# yet (a new crawl's first seconds, before anything analyzed it) priced them alike and took
# ``jobs_task_status``, filtering every fetch job for the one item at each slot: a
# reservation grew to 6 ms within 3 seconds of a 20,000-page crawl, until the next ANALYZE.
SLOT_HELD = (
    "(SELECT j.status = 'running' AND j.attempt = s.attempt FROM jobs j"
    f" WHERE j.item_id = s.item_id AND (j.task || '') = '{FETCH_TASK}')"
)


@functools.cache
def _slots_held(keys: int) -> TextClause:
    """Slots in use for *keys* keys (``:k0``...), one count per key in use, in one query."""
    named = ", ".join(f":k{n}" for n in range(keys))
    return q(
        f"SELECT s.key, count(*) FROM crawl_slots s WHERE s.key IN ({named})"
        f" AND s.until > :now AND {SLOT_HELD} GROUP BY s.key"
    )


_TAKE_SLOTS = (
    "INSERT INTO crawl_slots (key, item_id, attempt, until) {}"
    " ON CONFLICT (key, item_id) DO UPDATE SET attempt = excluded.attempt,"
    " until = excluded.until"
)
_TAKE_SLOTS_SQLITE = q(
    _TAKE_SLOTS.format(
        "SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(:rows) WHERE true"
    )
)
_TAKE_SLOTS_POSTGRES = q(
    _TAKE_SLOTS.format(
        "SELECT * FROM unnest(CAST(:keys AS text[]), CAST(:items AS text[]),"
        " CAST(:attempts AS int[]), CAST(:untils AS double precision[]))"
    )
)
# PostgreSQL: a batch of reservations locks its hosts' rows first, all in one statement and
# in one order (two batches cannot deadlock), then makes each reservation in one statement,
# read after the COMMIT it travels with: the rows stay locked only while the server works,
# not across round trips to a busy Python process. Each statement after the lock reads the
# row and the slots afresh (READ COMMITTED), so it sees what the last holder committed.
_LOCK_HOSTS = q(
    "SELECT host FROM crawl_hosts WHERE host = ANY(CAST(:hosts AS text[])) ORDER BY host FOR UPDATE"
)
_RESERVE_POSTGRES = q(
    "WITH h AS (SELECT next_at, blocked_until, errors FROM crawl_hosts WHERE host = :host),"
    " held AS (SELECT count(*) FILTER (WHERE s.key = :host_key) AS on_host,"
    " count(*) FILTER (WHERE s.key = :crawl_key) AS on_crawl FROM crawl_slots s"
    f" WHERE s.key IN (:host_key, :crawl_key) AND s.until > :now AND {SLOT_HELD}),"
    " go AS (SELECT greatest(CAST(:earliest AS float8), h.next_at) AS start FROM h, held"
    " WHERE (h.blocked_until IS NULL OR h.blocked_until <= :now) AND :concurrency > 0"
    " AND held.on_host < :per_host AND held.on_crawl < :concurrency"
    " AND greatest(CAST(:earliest AS float8), h.next_at) - :now <= :hold),"
    " moved AS (UPDATE crawl_hosts SET next_at = go.start + :step FROM go"
    " WHERE crawl_hosts.host = :host),"
    " taken AS (INSERT INTO crawl_slots (key, item_id, attempt, until)"
    " SELECT k, :item_id, :attempt, go.start + :span FROM go,"
    " unnest(CAST(ARRAY[:host_key, :crawl_key] AS text[])) AS k"
    " ON CONFLICT (key, item_id) DO UPDATE SET attempt = excluded.attempt,"
    " until = excluded.until)"
    " SELECT h.next_at, h.blocked_until, h.errors, held.on_host, held.on_crawl, go.start"
    " FROM h CROSS JOIN held LEFT JOIN go ON true"
)
_RUNNING = q(
    f"SELECT count(*) FROM jobs WHERE item_id = :item_id AND task = '{FETCH_TASK}'"
    " AND status = 'running' AND attempt = :attempt"
)
_RELEASE = q("DELETE FROM crawl_slots WHERE item_id = :item_id AND attempt = :attempt")
# A plan batch frees the slots of every request finished since the last one in one
# statement, not one a request (on PostgreSQL each costs the client about 90 us in psycopg;
# on SQLite each lets go of the GIL and waits to take it back).
_RELEASE_MANY_SQLITE = q(
    "DELETE FROM crawl_slots WHERE (item_id, attempt) IN"
    " (SELECT value ->> 0, value ->> 1 FROM json_each(:done))"
)
_RELEASE_MANY_POSTGRES = q(
    "DELETE FROM crawl_slots s USING unnest(CAST(:items AS text[]), CAST(:attempts AS int[]))"
    " AS d(item_id, attempt) WHERE s.item_id = d.item_id AND s.attempt = d.attempt"
)
_PURGE_SLOTS = q("DELETE FROM crawl_slots WHERE until < :now")

_ROBOTS = q("SELECT status, body, fetched_at FROM crawl_robots WHERE host = :host")
_PUT_ROBOTS = q(
    "INSERT INTO crawl_robots (host, status, body, fetched_at) VALUES (:host, :status, :body,"
    " :now) ON CONFLICT (host) DO UPDATE SET status = excluded.status, body = excluded.body,"
    " fetched_at = excluded.fetched_at"
)

_COUNTS = q(
    "SELECT j.status, j.due_at IS NULL AS final, j.waiting, count(*) AS n FROM crawl_pages p"
    f" JOIN jobs j ON j.item_id = p.item_id AND j.task = '{FETCH_TASK}'"
    " WHERE p.crawl_id = :crawl GROUP BY j.status, j.due_at IS NULL, j.waiting"
)
_FRONTIER = q(
    "SELECT min(p.depth) FROM crawl_pages p"
    f" JOIN jobs j ON j.item_id = p.item_id AND j.task = '{FETCH_TASK}'"
    " WHERE p.crawl_id = :crawl AND (j.status = 'running'"
    " OR (j.status IN ('queued', 'failed') AND j.due_at IS NOT NULL))"
)
_BYTES = q(
    "SELECT coalesce(sum(size), 0), count(*) FROM crawl_attempts"
    " WHERE crawl_id = :crawl AND status_code IS NOT NULL"
)
_BUSY = q(
    "SELECT host, count(*) AS n FROM crawl_attempts WHERE crawl_id = :crawl"
    " AND started_at >= :since GROUP BY host ORDER BY n DESC, host LIMIT :limit"
)
_PAGES = q(
    "SELECT p.url, p.depth, p.via, p.skip, j.status, j.due_at, j.attempt FROM crawl_pages p"
    f" JOIN jobs j ON j.item_id = p.item_id AND j.task = '{FETCH_TASK}'"
    " WHERE p.crawl_id = :crawl ORDER BY p.depth, p.url"
)
_ATTEMPTS = q(
    "SELECT url, attempt, ruleset, host, started_at, elapsed, outcome, status_code, location,"
    " content_type, size, outlinks, outlinks_cut, error, digest, warc_file, warc_offset,"
    " warc_length, subrequests, screenshot_file, screenshot_offset, screenshot_length,"
    " script_result FROM crawl_attempts WHERE crawl_id = :crawl ORDER BY id"
)


class CrawlTables:
    """The crawl tables over one database connection."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- crawls and rulesets --------------------------------------------------------------

    def create(self, row: dict[str, Any], now: float) -> int:
        params = row | {
            "seeds": codec.dumps(row["seeds"]),
            "options": codec.dumps(row["options"]),
            "now": now,
        }
        return int(self.db.execute(_INSERT_CRAWL, params).scalar_one())

    def get(self, crawl_id: int, *, lock: bool = False) -> CrawlRow | None:
        stmt = _CRAWL_LOCKED if lock and not self.db.is_sqlite else _CRAWL
        rows = self.db.fetch(stmt, {"id": crawl_id})
        return _crawl(rows[0]) if rows else None

    def all(self) -> list[CrawlRow]:
        return [_crawl(r) for r in self.db.fetch(_CRAWLS)]

    def newest(self, *, before: int | None, limit: int) -> list[CrawlRow]:
        """Crawls newest first with ids below *before* (a cursor)."""
        params = {"before": 2**62 if before is None else before, "limit": limit}
        return [_crawl(r) for r in self.db.fetch(_NEWEST, params)]

    def by_spec(self, spec: str) -> CrawlRow | None:
        rows = self.db.fetch(_BY_SPEC, {"spec": spec})
        return _crawl(rows[0]) if rows else None

    def update(self, crawl_id: int, column: str, value: Any) -> None:
        if column not in ("aborted", "ruleset", "concurrency", "niceness", "options"):
            raise ValueError(f"not a settable crawl column: {column}")
        if column == "options":
            value = codec.dumps(value)
        self.db.execute(q(_SET.format(column=column)), {"id": crawl_id, "value": value})

    def add_ruleset(
        self, crawl_id: int, version: int, rules: list[dict[str, Any]], now: float, note: str | None
    ) -> bool:
        """Store ruleset *version*; ``False`` if that version exists (someone else edited)."""
        params = {
            "crawl": crawl_id,
            "version": version,
            "rules": codec.dumps(rules),
            "now": now,
            "note": note,
        }
        return self.db.execute(_INSERT_RULESET, params).scalar() is not None

    def ruleset(self, crawl_id: int, version: int) -> list[dict[str, Any]]:
        rows = self.db.fetch(_RULESET, {"crawl": crawl_id, "version": version})
        return list(codec.loads(rows[0][0])) if rows else []

    # -- pages and links ------------------------------------------------------------------

    def page(self, crawl_id: int, url: str, *, lock: bool = False) -> PageRow | None:
        stmt = _PAGE_LOCKED if lock and not self.db.is_sqlite else _PAGE
        rows = self.db.fetch(stmt, {"crawl": crawl_id, "url": url})
        return _page(rows[0]) if rows else None

    def pages_of(
        self, crawl_id: int, urls: Sequence[str], *, lock: bool = False
    ) -> dict[str, PageRow]:
        """The pages of *urls* that exist; *lock*: their rows locked on PostgreSQL (in url
        order, so two transactions locking overlapping pages cannot deadlock)."""
        if not urls:
            return {}
        if self.db.is_sqlite:
            stmt = _PAGES_OF_SQLITE
        else:
            stmt = _PAGES_OF_LOCKED if lock else _PAGES_OF_POSTGRES
        rows = self.db.fetch(stmt, {"crawl": crawl_id, "urls": _list(self.db, urls)})
        return {r[0]: _page(r) for r in rows}

    def insert_pages(self, crawl_id: int, rows: Sequence[dict[str, Any]], now: float) -> set[str]:
        """Insert pages (url, item_id, depth, via, skip); returns the urls that were new."""
        rows = sorted(rows, key=lambda r: str(r["url"]))  # key order: no deadlocks (bulk.py)
        if not rows:
            return set()
        columns = [[r[c] for r in rows] for c in ("url", "item_id", "depth", "via", "skip")]
        if self.db.is_sqlite:
            params: dict[str, Any] = {"rows": codec.dumps(list(zip(*columns, strict=True)))}
            stmt = _INSERT_PAGES_SQLITE
        else:
            params = dict(zip(("urls", "items", "depths", "vias", "skips"), columns, strict=True))
            stmt = _INSERT_PAGES_POSTGRES
        return {r[0] for r in self.db.fetch(stmt, params | {"crawl": crawl_id, "now": now})}

    def lower(self, crawl_id: int, url: str, depth: int, via: str | None) -> PageRow | None:
        """Lower a page's depth if *depth* is smaller; the page as it now is, else ``None``."""
        params = {"crawl": crawl_id, "url": url, "depth": depth, "via": via}
        rows = self.db.fetch(_LOWER, params)
        if not rows:
            return None
        found, item_id, skip = rows[0]
        return PageRow(url=found, item_id=item_id, depth=depth, via=via, skip=skip)

    def set_skip(self, crawl_id: int, url: str, skip: str | None) -> None:
        self.db.send(_SET_SKIP, {"crawl": crawl_id, "url": url, "skip": skip})

    def add_links(self, crawl_id: int, links: Sequence[tuple[str, str, int]]) -> None:
        """Record (parent, child, hops) discovery edges (a known one keeps its fewest hops)."""
        fewest: dict[tuple[str, str], int] = {}
        for parent, child, hops in links:
            fewest[parent, child] = min(hops, fewest.get((parent, child), hops))
        edges = sorted(fewest.items())  # key order: no deadlocks (bulk.py)
        if not edges:
            return
        if self.db.is_sqlite:
            rows = codec.dumps([(p, c, h) for (p, c), h in edges])
            self.db.send(_INSERT_LINKS_SQLITE, {"crawl": crawl_id, "rows": rows})
            return
        params = {
            "crawl": crawl_id,
            "parents": [p for (p, _), _ in edges],
            "children": [c for (_, c), _ in edges],
            "hops": [h for _, h in edges],
        }
        self.db.send(_INSERT_LINKS_POSTGRES, params)

    def children(self, crawl_id: int, parents: Sequence[str]) -> list[tuple[str, str, int, int]]:
        """(parent, child, hops, child depth) for every link out of *parents*."""
        stmt = _CHILDREN_SQLITE if self.db.is_sqlite else _CHILDREN_POSTGRES
        rows = self.db.fetch(stmt, {"crawl": crawl_id, "parents": _list(self.db, parents)})
        return [(parent, child, int(hops), int(depth)) for parent, child, hops, depth in rows]

    # -- the pages' jobs ------------------------------------------------------------------

    def skip_jobs(self, item_ids: Sequence[str]) -> None:
        if item_ids:
            ids = _list(self.db, sorted(item_ids))
            self.db.send(
                _JOBS_SKIP_SQLITE if self.db.is_sqlite else _JOBS_SKIP_POSTGRES, {"ids": ids}
            )

    def unskip_jobs(self, item_ids: Sequence[str], now: float) -> None:
        if item_ids:
            ids = _list(self.db, sorted(item_ids))
            stmt = _JOBS_UNSKIP_SQLITE if self.db.is_sqlite else _JOBS_UNSKIP_POSTGRES
            self.db.send(stmt, {"ids": ids, "now": now})

    def park_jobs(self, crawl_id: int) -> int:
        return int(self.db.execute(_PARK, {"crawl": crawl_id}).rowcount)

    def park_job(self, item_id: str) -> None:
        self.db.send(_PARK_ONE, {"item_id": item_id})

    def unpark_jobs(self, crawl_id: int, now: float) -> int:
        return int(self.db.execute(_UNPARK, {"crawl": crawl_id, "now": now}).rowcount)

    def set_niceness(self, crawl_id: int, niceness: int) -> int:
        return int(self.db.execute(_NICE, {"crawl": crawl_id, "niceness": niceness}).rowcount)

    # -- attempts and payloads ------------------------------------------------------------

    def add_attempt(self, row: dict[str, Any]) -> None:
        self.add_attempts([row])

    def add_attempts(self, rows: Sequence[dict[str, Any]]) -> None:
        if not rows:
            return
        full = [_BROWSER_FIELDS | row for row in rows]
        if self.db.is_sqlite:
            values = [[row[name] for name in _ATTEMPT_FIELDS] for row in full]
            self.db.send(_INSERT_ATTEMPTS_SQLITE, {"rows": codec.dumps(values)})
            return
        self.db.send(_INSERT_ATTEMPTS_POSTGRES, {"rows": codec.dumps(full)})

    def add_page_items(self, items: Sequence[NewItem], now: float, creator: str | None) -> None:
        """Create the items of new pages (their jobs and journal rows with them); ids
        already in use are left as they are."""
        bulk.add_items(self.db, items, now, creator)

    def add_payload(self, crawl_id: int, digest: str, url: str, date: str) -> None:
        self.add_payloads([(crawl_id, digest, url, date)])

    def add_payloads(self, rows: Sequence[tuple[int, str, str, str]]) -> None:
        """(crawl, digest, url, date) first copies; of one digest the first is kept."""
        first: dict[tuple[int, str], tuple[str, str]] = {}
        for crawl, digest, url, date in rows:
            first.setdefault((crawl, digest), (url, date))
        if not first:
            return
        if self.db.is_sqlite:
            values = [(c, d, u, t) for (c, d), (u, t) in first.items()]
            self.db.send(_INSERT_PAYLOADS_SQLITE, {"rows": codec.dumps(values)})
            return
        columns: dict[str, list[Any]] = {"crawls": [], "digests": [], "urls": [], "dates": []}
        for (crawl, digest), (url, date) in sorted(first.items()):
            for name, value in zip(columns, (crawl, digest, url, date), strict=True):
                columns[name].append(value)
        self.db.send(_INSERT_PAYLOADS_POSTGRES, columns)

    def payloads(self, crawl_id: int) -> dict[str, tuple[str, str]]:
        rows = self.db.fetch(_PAYLOADS, {"crawl": crawl_id})
        return {digest: (url, date) for digest, url, date in rows}

    def payload(self, crawl_id: int, digest: str) -> tuple[str, str] | None:
        """(url, WARC-Date) of the first archived copy of *digest* in the crawl."""
        return self.payloads_of(crawl_id, [digest]).get(digest)

    def payloads_of(self, crawl_id: int, digests: Sequence[str]) -> dict[str, tuple[str, str]]:
        """(url, WARC-Date) of the first archived copy of each of *digests* the crawl has
        archived, by digest: one query however many."""
        stmt = _PAYLOADS_OF_SQLITE if self.db.is_sqlite else _PAYLOADS_OF_POSTGRES
        rows = self.db.fetch(stmt, {"crawl": crawl_id, "digests": _list(self.db, digests)})
        return {digest: (url, date) for digest, url, date in rows}

    # -- politeness -----------------------------------------------------------------------

    def host(self, host: str, *, known: bool = False) -> tuple[float, float | None, int]:
        """(next start, blocked until, consecutive errors) for *host*, its row locked on
        PostgreSQL; *known*: the caller saw the row before (it is never deleted), so it
        need not be created."""
        if not known:
            self.db.send(_HOST_INIT, {"host": host})
        stmt = _HOST if self.db.is_sqlite else _HOST_LOCKED
        next_at, blocked_until, errors = self.db.fetch(stmt, {"host": host})[0]
        return float(next_at), blocked_until, int(errors)

    def host_error(self, host: str, now: float) -> tuple[bool, int, float, float | None]:
        """Count one more consecutive error of *host*: (counted, errors in the run, when the
        run began, blocked until)."""
        self.db.send(_HOST_INIT, {"host": host})
        counted = bool(self.db.fetch(_HOST_ERROR, {"host": host, "now": now}))
        errors, since, blocked_until = self.db.fetch(_HOST_ERRORS, {"host": host})[0]
        return counted, int(errors), float(since or now), blocked_until

    def host_errors(self, host: str) -> int:
        """The errors in *host*'s current run (0: none, or it answered since)."""
        rows = self.db.fetch(_HOST_ERRORS, {"host": host})
        return int(rows[0][0]) if rows else 0

    def failed_last(self, crawl_id: int, url: str) -> bool:
        """Whether the page's last recorded attempt failed at host level (no answer, or a
        5xx): the attempt being made now is not recorded yet."""
        rows = self.db.fetch(_FAILED_LAST, {"crawl_id": crawl_id, "url": url})
        return bool(rows and rows[0][0])

    def tries_spent(self, item_id: str) -> int:
        """The page's consecutive attempts that failed and spent a try (an attempt that
        waited for its host without spending one does not count; a success resets it)."""
        rows = self.db.fetch(_FAIL_COUNT, {"item_id": item_id})
        return int(rows[0][0]) if rows else 0

    def host_ok(self, host: str) -> None:
        self.db.send(_HOST_OK, {"host": host})

    # The writes of the politeness gate nobody reads back go with the next statement or
    # the COMMIT (one round trip on PostgreSQL; Database.send).
    def set_next(self, host: str, next_at: float) -> None:
        self.db.send(_HOST_NEXT, {"host": host, "next_at": next_at})

    def block(self, host: str, until: float) -> None:
        self.db.send(_HOST_INIT, {"host": host})  # a host not yet seen can be blocked too
        self.db.send(_HOST_BLOCK, {"host": host, "until": until})

    def held(self, keys: Sequence[str], now: float) -> dict[str, int]:
        """Slots in use per key."""
        found = dict.fromkeys(keys, 0)
        named = {f"k{n}": key for n, key in enumerate(keys)}
        for key, count in self.db.fetch(_slots_held(len(keys)), named | {"now": now}):
            found[key] = int(count)
        return found

    def take(self, slots: Sequence[tuple[str, str, int, float]]) -> None:
        """Take the slots (key, item, attempt, until), in one statement; of a slot named
        twice the last counts, as when taken one after the other (PostgreSQL will not
        update one row twice in a statement)."""
        slots = list({(key, item): (key, item, a, u) for key, item, a, u in slots}.values())
        if not slots:
            return
        if self.db.is_sqlite:
            self.db.send(_TAKE_SLOTS_SQLITE, {"rows": codec.dumps(slots)})
            return
        keys, items, attempts, untils = (list(column) for column in zip(*slots, strict=True))
        params = {"keys": keys, "items": items, "attempts": attempts, "untils": untils}
        self.db.send(_TAKE_SLOTS_POSTGRES, params)

    def lock_hosts(self, hosts: Sequence[str], *, known: set[str]) -> None:
        """PostgreSQL: lock *hosts*' rows (made first where not in *known*), in one order."""
        for host in hosts:
            if host not in known:
                self.db.send(_HOST_INIT, {"host": host})
        self.db.send(_LOCK_HOSTS, {"hosts": sorted(hosts)})

    def reserve_later(self, asks: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """PostgreSQL, after :meth:`lock_hosts`: for each ask in order, the next start on a
        host and a slot per key in one statement, if the host is free, its and the crawl's
        slots not all in use and the start within ``hold``; each sees the ones before it.
        Their rows, filled once the statements have run: the host's (next start, blocked
        until, errors) and the slots in use (host, crawl) before it, and the start it
        reserved (``None``: it reserved nothing)."""
        return self.db.fetch_many_later(_RESERVE_POSTGRES, asks)

    def running(self, item_id: str, attempt: int) -> bool:
        """Whether the page *item_id*'s fetch job is running its attempt *attempt*."""
        [(found,)] = self.db.fetch(_RUNNING, {"item_id": item_id, "attempt": attempt})
        return bool(found)

    def release(self, item_id: str, attempt: int) -> None:
        self.db.send(_RELEASE, {"item_id": item_id, "attempt": attempt})

    def release_many(self, done: Sequence[tuple[str, int]]) -> None:
        """Free the slots of the requests *done* (item, attempt)."""
        if len(done) <= 1:
            for item_id, attempt in done:
                self.release(item_id, attempt)
            return
        if self.db.is_sqlite:
            self.db.send(_RELEASE_MANY_SQLITE, {"done": codec.dumps(done)})
            return
        items, attempts = [d[0] for d in done], [d[1] for d in done]
        self.db.send(_RELEASE_MANY_POSTGRES, {"items": items, "attempts": attempts})

    def purge_slots(self, now: float) -> None:
        self.db.send(_PURGE_SLOTS, {"now": now})

    def robots(self, host: str) -> tuple[int, str, float] | None:
        rows = self.db.fetch(_ROBOTS, {"host": host})
        return (int(rows[0][0]), rows[0][1], float(rows[0][2])) if rows else None

    def put_robots(self, host: str, status: int, body: str, now: float) -> None:
        self.db.send(_PUT_ROBOTS, {"host": host, "status": status, "body": body, "now": now})

    # -- progress and reports -------------------------------------------------------------

    def counts(self, crawl_id: int) -> list[tuple[str, bool, str | None, int]]:
        """(job status, due_at is NULL, waiting, count) over the crawl's pages."""
        rows = self.db.execute(_COUNTS, {"crawl": crawl_id})
        return [(r.status, bool(r.final), r.waiting, int(r.n)) for r in rows]

    def frontier(self, crawl_id: int) -> int | None:
        value = self.db.execute(_FRONTIER, {"crawl": crawl_id}).scalar()
        return None if value is None else int(value)

    def fetched(self, crawl_id: int) -> tuple[int, int]:
        """(bytes received, responses received)."""
        size, count = self.db.execute(_BYTES, {"crawl": crawl_id}).one()
        return int(size), int(count)

    def busy_hosts(self, crawl_id: int, since: float, limit: int = 3) -> list[tuple[str, int]]:
        rows = self.db.execute(_BUSY, {"crawl": crawl_id, "since": since, "limit": limit})
        return [(r.host, int(r.n)) for r in rows]

    def pages(self, crawl_id: int) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in self.db.execute(_PAGES, {"crawl": crawl_id})]

    def attempts(self, crawl_id: int) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in self.db.execute(_ATTEMPTS, {"crawl": crawl_id})]


def _crawl(row: Any) -> CrawlRow:
    (id_, spec, seeds, depth_limit, niceness, concurrency, tag, by, note, aborted) = row[:10]
    return CrawlRow(
        id=int(id_),
        spec=spec,
        seeds=list(codec.loads(seeds)),
        depth_limit=depth_limit,
        niceness=niceness,
        concurrency=concurrency,
        tag=tag,
        created_by=by,
        note=note,
        aborted=bool(aborted),
        ruleset=row[10],
        options=codec.loads(row[11]),
        created_at=row[12],
    )


def _page(row: Any) -> PageRow:
    url, item_id, depth, via, skip = row
    return PageRow(url=url, item_id=item_id, depth=int(depth), via=via, skip=skip)


def _list(db: Database, values: Sequence[Any]) -> Any:
    """A list parameter: a JSON array on SQLite (``json_each``), an array on PostgreSQL."""
    return codec.dumps(list(values)) if db.is_sqlite else list(values)
