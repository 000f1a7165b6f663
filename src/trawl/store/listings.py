"""Listings a client pages through: each ordered by a unique key and read after a cursor
(keyset pagination), so a page costs the same at the millionth row as at the first and a
row added meanwhile is neither skipped nor shown twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trawl.model.records import FailureRecord, JournalEntry
from trawl.store.admin import failure_filter
from trawl.store.connection import Database
from trawl.store.crawls import FETCH_TASK
from trawl.store.reads import failure_record, journal_entry
from trawl.store.sql import q


@dataclass(frozen=True, kw_only=True, slots=True)
class DueJob:
    """One job of a worklist, in the order claims take them."""

    job_id: int
    item_id: str
    task: str
    niceness: int
    ever_run: bool
    due_at: float
    attempt: int
    fail_count: int


@dataclass(frozen=True, kw_only=True, slots=True)
class CrawlPage:
    url: str
    depth: int
    via: str | None
    skip: str | None
    status: str
    due_at: float | None
    attempt: int


@dataclass(frozen=True, kw_only=True, slots=True)
class PageAttempt:
    """One fetch of a crawl's page: what came back and where the WARC holds it."""

    attempt: int
    ruleset: int
    started_at: float
    elapsed: float
    outcome: str
    status_code: int | None
    location: str | None
    content_type: str | None
    size: int | None
    outlinks: int
    error: str | None
    warc_file: str | None
    warc_offset: int | None
    warc_length: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureGroup:
    """Unhandled failures of one task with one error type."""

    task: str
    error_type: str
    count: int
    last_at: float
    last_id: int


@dataclass(frozen=True, kw_only=True, slots=True)
class HostState:
    host: str
    next_at: float  # the next request to it may start then
    blocked_until: float | None  # a 429 or a run of errors holds it back until then
    errors: int  # in a row
    errors_since: float | None


_HOSTS = q(
    "SELECT host, next_at, blocked_until, errors, errors_since FROM crawl_hosts"
    " WHERE host > :after ORDER BY host LIMIT :limit"
)

_WORKLIST = (
    "SELECT j.id, j.item_id, j.task, j.niceness, j.ever_run, j.due_at, j.attempt,"
    " j.fail_count FROM jobs j WHERE j.due_at <= :now {filter}"
    " AND (j.niceness, j.ever_run, j.due_at, j.id) > (:n, :e, :d, :i)"
    " ORDER BY j.niceness, j.ever_run, j.due_at, j.id LIMIT :limit"
)
_BY_TASK = "AND j.task = :task"
_BY_TAG = "AND EXISTS (SELECT 1 FROM tags t WHERE t.item_id = j.item_id AND t.name = :tag)"

_FAILURES = (
    "SELECT id, job_id, item_id, task, attempt, error_type, message, traceback,"
    " occurred_at, handled FROM failures WHERE {where} AND id < :before"
    " ORDER BY id DESC LIMIT :limit"
)

_FAILURE_GROUPS = q(
    "SELECT task, error_type, count(*) AS n, max(occurred_at) AS last_at, max(id) AS last_id"
    " FROM failures WHERE NOT handled GROUP BY task, error_type"
    " ORDER BY max(id) DESC LIMIT :limit"
)

_ITEM_JOURNAL = q(
    "SELECT seq, at, kind, item_id, task, detail FROM journal"
    " WHERE item_id = :item AND seq > :after AND seq <= :upto ORDER BY seq LIMIT :limit"
)

_CRAWL_PAGES = (
    "SELECT p.url, p.depth, p.via, p.skip, j.status, j.due_at, j.attempt FROM crawl_pages p"
    f" JOIN jobs j ON j.item_id = p.item_id AND j.task = '{FETCH_TASK}'"
    " WHERE p.crawl_id = :crawl AND p.url > :after {filter} ORDER BY p.url LIMIT :limit"
)
_SEARCH = "AND p.url LIKE :pattern ESCAPE '\\'"
_DEPTHS = q(
    "SELECT depth, count(*) AS n FROM crawl_pages WHERE crawl_id = :crawl"
    " GROUP BY depth ORDER BY depth"
)
_PAGE_ATTEMPTS = q(
    "SELECT attempt, ruleset, started_at, elapsed, outcome, status_code, location,"
    " content_type, size, outlinks, error, warc_file, warc_offset, warc_length"
    " FROM crawl_attempts WHERE crawl_id = :crawl AND url = :url ORDER BY id"
)


class Listings:
    """Cursor-paged reads for the API; each runs in the caller's transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def due(
        self,
        now: float,
        *,
        task: str | None,
        tag: str | None,
        after: tuple[int, bool, float, int] | None,
        limit: int,
    ) -> list[DueJob]:
        """Due jobs of *task* or of items tagged *tag* (or both), in claim order, after the
        sort key *after* of the last job seen."""
        filters: list[str] = []
        params: dict[str, Any] = {"now": now, "limit": limit}
        if task is not None:
            filters.append(_BY_TASK)
            params["task"] = task
        if tag is not None:
            filters.append(_BY_TAG)
            params["tag"] = tag
        niceness, ever_run, due_at, job_id = after or (-(2**31), False, -1e300, -1)
        params |= {"n": niceness, "e": ever_run, "d": due_at, "i": job_id}
        stmt = q(_WORKLIST.format(filter=" ".join(filters)))
        return [
            DueJob(
                job_id=r.id,
                item_id=r.item_id,
                task=r.task,
                niceness=r.niceness,
                ever_run=bool(r.ever_run),
                due_at=r.due_at,
                attempt=r.attempt,
                fail_count=r.fail_count,
            )
            for r in self.db.execute(stmt, params)
        ]

    def failures(
        self,
        *,
        task: str | None,
        item_id: str | None,
        include_handled: bool,
        before: int | None,
        limit: int,
        error_type: str | None = None,
    ) -> list[FailureRecord]:
        """Newest first, older than failure id *before*."""
        where, params = failure_filter(task, item_id, None)
        if not include_handled:
            where += " AND NOT handled"
        if error_type is not None:
            where += " AND error_type = :error_type"
            params["error_type"] = error_type
        params |= {"before": 2**62 if before is None else before, "limit": limit}
        return [
            failure_record(r) for r in self.db.execute(q(_FAILURES.format(where=where)), params)
        ]

    def failure(self, failure_id: int) -> FailureRecord | None:
        found = self.db.execute(
            q(_FAILURES.format(where="id = :id")), {"id": failure_id, "before": 2**62, "limit": 1}
        ).first()
        return None if found is None else failure_record(found)

    def item_journal(self, item_id: str, after: int, limit: int) -> list[JournalEntry]:
        """The journal entries of one item (its operations), oldest first."""
        params = {
            "item": item_id,
            "after": after,
            "upto": self.db.journal_horizon(),
            "limit": limit,
        }
        rows = self.db.execute(_ITEM_JOURNAL, params)
        return [journal_entry(r) for r in rows]

    def crawl_pages(
        self,
        crawl_id: int,
        *,
        status: str | None,
        after: str,
        limit: int,
        containing: str | None = None,
    ) -> list[CrawlPage]:
        """A crawl's pages in URL order, optionally only those whose fetch job has *status*
        and whose URL contains *containing*."""
        params: dict[str, Any] = {"crawl": crawl_id, "after": after, "limit": limit}
        extra = []
        if status is not None:
            extra.append("AND j.status = :status")
            params["status"] = status
        if containing:
            extra.append(_SEARCH)
            params["pattern"] = f"%{_escape_like(containing)}%"
        stmt = q(_CRAWL_PAGES.format(filter=" ".join(extra)))
        return [
            CrawlPage(
                url=r.url,
                depth=r.depth,
                via=r.via,
                skip=r.skip,
                status=r.status,
                due_at=r.due_at,
                attempt=r.attempt,
            )
            for r in self.db.execute(stmt, params)
        ]

    def depths(self, crawl_id: int) -> list[tuple[int, int]]:
        """(depth, pages) of a crawl, shallowest first: one range of its depth index."""
        rows = self.db.execute(_DEPTHS, {"crawl": crawl_id})
        return [(int(r.depth), int(r.n)) for r in rows]

    def page_attempts(self, crawl_id: int, url: str) -> list[PageAttempt]:
        """Every fetch of one page, oldest first."""
        rows = self.db.execute(_PAGE_ATTEMPTS, {"crawl": crawl_id, "url": url})
        return [PageAttempt(**r._mapping) for r in rows]

    def failure_groups(self, limit: int) -> list[FailureGroup]:
        """Unhandled failures by task and error type, the group with the newest first."""
        return [
            FailureGroup(
                task=r.task,
                error_type=r.error_type,
                count=int(r.n),
                last_at=r.last_at,
                last_id=int(r.last_id),
            )
            for r in self.db.execute(_FAILURE_GROUPS, {"limit": limit})
        ]

    def hosts(self, *, after: str, limit: int) -> list[HostState]:
        """Hosts in name order with their politeness state."""
        rows = self.db.execute(_HOSTS, {"after": after, "limit": limit})
        return [
            HostState(
                host=r.host,
                next_at=r.next_at,
                blocked_until=r.blocked_until,
                errors=r.errors,
                errors_since=r.errors_since,
            )
            for r in rows
        ]


def _escape_like(text: str) -> str:
    """*text* matched literally inside a LIKE pattern (escape character: backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
