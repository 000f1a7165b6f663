"""Crawls: start one (its pages are then fetched by whatever workers run `trawl.fetch`),
list and show them with progress, abort and resume, change concurrency, niceness and rules,
and page through their pages and the hosts' politeness state."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, get, post, put
from litestar.params import Parameter

from trawl.crawl import operations
from trawl.crawl import rules as crawl_rules
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.model.errors import InvalidInput, UnknownTask
from trawl.server import cursors
from trawl.server.live import Live
from trawl.server.pipelines.notify import tell_pipelines
from trawl.server.stores import Stores
from trawl.store.crawls import FETCH_TASK, CrawlRow
from trawl.store.listings import CrawlPage, HostState
from trawl.store.store import Store

Limit = Annotated[int, Parameter(ge=1, le=cursors.MAX_LIMIT)]
PageStatus = Literal["queued", "running", "done", "failed", "skipped"]


class NewCrawl(msgspec.Struct, forbid_unknown_fields=True):
    """As `trawl crawl start` takes it; `accept` and `reject` are regular expressions."""

    seeds: list[str]
    depth: cursors.Depth | None = None
    accept: list[str] = []
    reject: list[str] = []
    user_agent: str | None = None
    niceness: cursors.Niceness = 0
    concurrency: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 8
    tag: str | None = None
    note: str | None = None
    delay: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    per_host: Annotated[int, msgspec.Meta(ge=1)] | None = None
    robots: bool = True
    timeout: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    warc: str | None = None


class Crawl(msgspec.Struct):
    crawl: CrawlRow
    status: str
    ready: int
    claimed: int
    done: int
    failed: int
    skipped: int
    parked: int
    bytes: int
    responses: int
    frontier: int | None


class CrawlList(msgspec.Struct):
    crawls: list[CrawlRow]


class Setting(msgspec.Struct, forbid_unknown_fields=True):
    value: cursors.Niceness  # a concurrency (checked >= 1 by the crawl) or a niceness


class RuleIn(msgspec.Struct, forbid_unknown_fields=True):
    kind: str
    match: str
    value: str | bool | int | float = True


class RulesEdit(msgspec.Struct, forbid_unknown_fields=True):
    """Add rules and remove others (positions from 1, as listed). With `ensure`, only if
    the ruleset is still that version: a 409 says someone else changed it meanwhile."""

    add: list[RuleIn] = []
    remove: list[cursors.Id] = []
    ensure: cursors.Id | None = None
    note: str | None = None


class Rules(msgspec.Struct):
    version: int
    rules: list[dict[str, Any]]


class PageList(msgspec.Struct):
    pages: list[CrawlPage]
    next: str | None


class HostList(msgspec.Struct):
    hosts: list[HostState]
    next: str | None


class Changed(msgspec.Struct):
    crawl: int
    changed: int


def _progress(store: Store, crawl_id: int) -> Crawl:
    p = operations.progress(store, crawl_id)
    return Crawl(
        crawl=p.crawl,
        status=p.status,
        ready=p.ready,
        claimed=p.claimed,
        done=p.done,
        failed=p.failed,
        skipped=p.skipped,
        parked=p.parked,
        bytes=p.bytes,
        responses=p.responses,
        frontier=p.frontier,
    )


def _spec(data: NewCrawl) -> CrawlSpec:
    if not data.seeds:
        raise InvalidInput("a crawl needs at least one seed URL")
    for pattern in (*data.accept, *data.reject):
        crawl_rules.make_rule("accept", pattern)  # checks the regex, naming it if bad
    options = Options(
        delay=data.delay,
        per_host=data.per_host,
        robots=data.robots,
        timeout=data.timeout,
        warc=data.warc,
    )
    return CrawlSpec(
        seeds=operations.canonical_seeds(tuple(data.seeds)),
        depth=data.depth,
        accept=tuple(data.accept),
        reject=tuple(data.reject),
        user_agent=data.user_agent,
        niceness=data.niceness,
        concurrency=data.concurrency,
        tag=data.tag,
        note=data.note,
        created_by="api",
        options=options,
    )


class Crawls(Controller):
    path = "/crawls"
    tags = ("crawls",)

    @post("/", opt={"scope": "write"}, status_code=201)
    async def create(self, data: NewCrawl, stores: Stores) -> Crawl:
        """Start a crawl: its seeds become pages due now for the workers that run
        `trawl.fetch` (`trawl worker`/`trawl run` with the crawl app)."""
        spec = _spec(data)

        def run(store: Store) -> Crawl:
            try:
                store.require_task(FETCH_TASK)
            except UnknownTask:  # as `trawl crawl start` would, with the default lease
                operations.register(store, make_app().get(FETCH_TASK).info())
            return _progress(store, operations.create(store, spec))

        return await stores.run(run)

    @get("/", opt={"scope": "read"})
    async def list_crawls(self, stores: Stores) -> CrawlList:
        return CrawlList(crawls=await stores.run(operations.all_crawls))

    @get("/{crawl_id:int}", opt={"scope": "read"})
    async def show(self, crawl_id: cursors.PathId, stores: Stores) -> Crawl:
        """The crawl with its pages counted by state, bytes fetched and frontier depth."""
        return await stores.run(lambda store: _progress(store, crawl_id))

    @post("/{crawl_id:int}/abort", opt={"scope": "write"}, status_code=200)
    async def abort(self, crawl_id: cursors.PathId, stores: Stores) -> Changed:
        """Park every page not yet fetched; fetches in flight finish."""
        count = await stores.run(lambda store: operations.abort(store, crawl_id))
        return Changed(crawl=crawl_id, changed=count)

    @post("/{crawl_id:int}/resume", opt={"scope": "write"}, status_code=200)
    async def resume(self, crawl_id: cursors.PathId, stores: Stores) -> Changed:
        count = await stores.run(lambda store: operations.resume(store, crawl_id))
        return Changed(crawl=crawl_id, changed=count)

    @put("/{crawl_id:int}/concurrency", opt={"scope": "write"})
    async def concurrency(self, crawl_id: cursors.PathId, data: Setting, stores: Stores) -> Changed:
        """Requests in flight for the crawl across all workers."""
        await stores.run(lambda store: operations.set_concurrency(store, crawl_id, data.value))
        return Changed(crawl=crawl_id, changed=1)

    @put("/{crawl_id:int}/niceness", opt={"scope": "write"})
    async def niceness(self, crawl_id: cursors.PathId, data: Setting, stores: Stores) -> Changed:
        """Claim priority of the crawl's pages (lower goes first)."""
        count = await stores.run(lambda store: operations.set_niceness(store, crawl_id, data.value))
        return Changed(crawl=crawl_id, changed=count)

    @get("/{crawl_id:int}/rules", opt={"scope": "read"})
    async def rules(self, crawl_id: cursors.PathId, stores: Stores) -> Rules:
        version, rules = await stores.run(lambda store: operations.rules(store, crawl_id))
        return Rules(version=version, rules=rules)

    @post("/{crawl_id:int}/rules", opt={"scope": "write"}, status_code=200)
    async def edit_rules(
        self, crawl_id: cursors.PathId, data: RulesEdit, stores: Stores, live: Live
    ) -> Rules:
        """A new ruleset version; 409 if `ensure` is not the current version. Connected
        pipelines are told (a `rules` advisory); their next fetch plans obey."""
        add = [crawl_rules.make_rule(r.kind, r.match, r.value) for r in data.add]

        def run(store: Store) -> tuple[int, list[dict[str, Any]]]:
            operations.edit_rules(
                store, crawl_id, add=add, remove=data.remove, ensure=data.ensure, note=data.note
            )
            return operations.rules(store, crawl_id)

        version, rules = await stores.run(run)
        await tell_pipelines(live, "rules", {"crawl": crawl_id, "version": version})
        return Rules(version=version, rules=rules)

    @get("/{crawl_id:int}/pages", opt={"scope": "read"})
    async def pages(
        self,
        crawl_id: cursors.PathId,
        stores: Stores,
        status: PageStatus | None = None,
        cursor: str | None = None,
        limit: Limit = cursors.DEFAULT_LIMIT,
    ) -> PageList:
        """The crawl's pages in URL order, optionally only those in one state."""
        after = cursors.decode(cursor, str) or ""

        def run(store: Store) -> list[CrawlPage]:
            operations.get(store, crawl_id)
            with store.read():
                return store.listings.crawl_pages(crawl_id, status=status, after=after, limit=limit)

        rows = await stores.run(run)
        return PageList(pages=rows, next=cursors.next_cursor(rows, limit, lambda p: p.url))


class Hosts(Controller):
    path = "/hosts"
    tags = ("crawls",)

    @get("/", opt={"scope": "read"})
    async def hosts(
        self, stores: Stores, cursor: str | None = None, limit: Limit = cursors.DEFAULT_LIMIT
    ) -> HostList:
        """Every host crawled, with its politeness state: when its next request may start,
        until when it is blocked (429s, errors), and its errors in a row."""
        after = cursors.decode(cursor, str) or ""

        def run(store: Store) -> list[HostState]:
            with store.read():
                return store.listings.hosts(after=after, limit=limit)

        rows = await stores.run(run)
        return HostList(hosts=rows, next=cursors.next_cursor(rows, limit, lambda h: h.host))
