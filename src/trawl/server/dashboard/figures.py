"""What the live pages show, read once and used both to render a page and by the feed that
keeps it current: the same reads, through the same store verbs and crawl operations as the
API, so the dashboard and the API cannot disagree.

Whole-database counts come from the metrics' cached gauges (``DbMetrics``), never a count
of a large table per page view; a crawl's figures are index ranges over its own rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trawl.crawl import operations
from trawl.crawl.operations import Progress
from trawl.model.records import PipelineRow, TaskCounts
from trawl.runtime.dbmetrics import DbMetrics
from trawl.store.activity import HostActivity, WorkerLease
from trawl.store.gauges import Snapshot
from trawl.store.store import Store

RATE_WINDOW = 30.0  # seconds of requests a crawl's pages/s is measured over
HOSTS_WINDOW = 600.0  # a crawl's hosts are those it made requests to in this window
HOSTS_SHOWN = 25
CRAWLS_SHOWN = 50  # crawls on one page of the list
PIPELINES_SHOWN = 500  # remote pipelines on the overview and their page
PAGE_COUNTS_AGE = 30.0  # seconds: a crawl page's first view may show page counts this old


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskLine:
    counts: TaskCounts
    oldest_due: float | None  # seconds the longest-waiting due job has waited
    orphaned: bool  # jobs are due but no worker declared the task


@dataclass(frozen=True, kw_only=True, slots=True)
class Overview:
    at: float
    tasks: list[TaskLine]
    workers: list[WorkerLease]
    snapshot: Snapshot | None  # None: no reading of the gauges yet (the feed brings one)
    pipelines: list[PipelineRow] = field(default_factory=list)

    @property
    def oldest_due(self) -> tuple[str, float] | None:
        waiting = [(t.oldest_due, t.counts.task) for t in self.tasks if t.oldest_due is not None]
        if not waiting:
            return None
        age, task = max(waiting)
        return task, age


@dataclass(frozen=True, kw_only=True, slots=True)
class CrawlFigures:
    progress: Progress
    pages_per_second: float
    depths: list[tuple[int, int]]
    hosts: list[HostActivity] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class CrawlList:
    crawls: list[Progress]
    next: int | None  # the `before` of the next page, if there may be one
    counted: bool = True  # False: no gauge reading yet, the states are not known


def gauges_of(store: Store, gauges: DbMetrics, *, wait: bool) -> Snapshot | None:
    """The gauges: read if due when *wait* (the feed); else the last reading, however old,
    or None (a page: the counts cost most of a second on a million jobs, and the feed sends
    fresh ones a moment after the page opens, so no page waits for them)."""
    return gauges.refresh(store) if wait else gauges.last


def overview(store: Store, gauges: DbMetrics, *, wait: bool = True) -> Overview:
    """Per task lines, workers holding leases, crawl and host gauges."""
    snap = gauges_of(store, gauges, wait=wait)
    if snap is None:
        return Overview(at=store.clock(), tasks=[], workers=[], snapshot=None)
    pipelines = store.pipelines.list(limit=PIPELINES_SHOWN)
    now = gauges.read_at
    lines = [
        TaskLine(
            counts=t,
            oldest_due=(now - snap.oldest_due[t.task]) if t.task in snap.oldest_due else None,
            orphaned=not t.registered and t.due_now > 0,
        )
        for t in snap.tasks
    ]
    with store.read():
        workers = store.activity.workers([t.task for t in snap.tasks])
    return Overview(at=now, tasks=lines, workers=workers, snapshot=snap, pipelines=pipelines)


def crawl_list(
    store: Store, gauges: DbMetrics, before: int | None = None, *, wait: bool = True
) -> CrawlList:
    """A page of crawls, newest first, each with its progress from the cached gauges."""
    snap = gauges_of(store, gauges, wait=wait)
    with store.read():
        rows = store.crawls.newest(before=before, limit=CRAWLS_SHOWN)
    counts = snap.crawls if snap is not None else {}
    shown = [operations.summary(r, counts.get(r.id, [])) for r in rows]
    more = rows[-1].id if len(rows) == CRAWLS_SHOWN else None
    return CrawlList(crawls=shown, next=more, counted=snap is not None)


def crawl(store: Store, crawl_id: int, gauges: DbMetrics | None = None) -> CrawlFigures:
    """One crawl's progress (as ``GET /crawls/{id}``), rate, depths and busy hosts. With
    *gauges* read less than PAGE_COUNTS_AGE ago, its pages are counted from them (a page's
    first view: counting 100,000 pages costs a fifth of a second, and the feed sends the
    exact counts a moment later); without, counted now (the feed)."""
    snap = gauges.last if gauges is not None and gauges.age < PAGE_COUNTS_AGE else None
    counts = snap.crawls.get(crawl_id) if snap is not None else None  # None: a newer crawl
    progress = operations.progress(store, crawl_id, counts=counts)
    now = progress.at
    with store.read():
        recent = store.activity.crawl_requests(crawl_id, now - RATE_WINDOW)
        depths = store.listings.depths(crawl_id)
        hosts = store.activity.crawl_hosts(crawl_id, now - HOSTS_WINDOW, now, HOSTS_SHOWN)
    return CrawlFigures(
        progress=progress,
        pages_per_second=recent / RATE_WINDOW,
        depths=depths,
        hosts=hosts,
    )
