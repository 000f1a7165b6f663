"""Crawling on a remote pipeline: permits from the tracker, outcomes to it as data.

The pipeline fetches, writes its WARC locally and sends what each attempt learned (status,
final URL, outlinks, record offsets) as the crawler's custom effects by name. The tracker
runs the politeness gate for it (``crawl.begin``), so remote and local fetchers share one
per-host delay and concurrency. This module is both sides' translation: plans and outcomes
to data and back, with the checks the tracker makes before it applies anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import msgspec

from trawl.crawl import urls
from trawl.crawl.frontier import Discover, Found
from trawl.crawl.options import Options
from trawl.crawl.outcomes import Fetched, Parked, Skipped
from trawl.crawl.politeness import Plan
from trawl.crawl.port import Finished
from trawl.crawl.robots import Robots
from trawl.crawl.rules import Ruleset, Settings, from_json
from trawl.model import wire
from trawl.model.errors import InvalidInput
from trawl.runtime.context import Context
from trawl.runtime.remote.connection import Connection, RequestRefused
from trawl.store.crawls import CrawlRow

T = TypeVar("T")

# -- plans ---------------------------------------------------------------------------------------


def plan_to_wire(plan: Plan) -> wire.CrawlPlan:
    # msgspec.to_builtins, not dataclasses.asdict: the tracker makes one of these a page,
    # and asdict's deep copy took 21 us of a crawl row where to_builtins takes 1 (timeit).
    return wire.CrawlPlan(
        action=plan.action,
        crawl=msgspec.to_builtins(plan.crawl) if plan.crawl is not None else None,
        ruleset=plan.ruleset.version if plan.ruleset is not None else None,
        rules=[r.to_json() for r in plan.ruleset.rules] if plan.ruleset is not None else [],
        settings=msgspec.to_builtins(plan.settings) if plan.settings is not None else None,
        start_at=plan.start_at,
        until=plan.until,
        reason=plan.reason,
        host_errors=plan.host_errors,
        delay=plan.delay,
    )


def plan_from_wire(plan: wire.CrawlPlan) -> Plan:
    crawl = msgspec.convert(plan.crawl, CrawlRow) if plan.crawl is not None else None
    return Plan(
        action=plan.action,
        crawl=crawl,
        options=Options.from_json(crawl.options) if crawl is not None else None,
        ruleset=Ruleset(plan.ruleset, from_json(plan.rules)) if plan.ruleset is not None else None,
        settings=msgspec.convert(plan.settings, Settings) if plan.settings is not None else None,
        start_at=plan.start_at,
        until=plan.until,
        reason=plan.reason,
        host_errors=plan.host_errors,
        delay=plan.delay,
    )


class RemotePort:
    """The politeness gate at the tracker, for a pipeline's fetches."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        # Fields added to requests since the first protocol version that this tracker
        # refused as unknown (it is from before them): asked for without them since.
        self._refused: set[str] = set()

    async def _newest(
        self,
        fields: str,
        newer: Callable[[], Awaitable[T]] | None,
        older: Callable[[], Awaitable[T]],
    ) -> T:
        """Ask by *newer*, which sends *fields*; if the tracker refuses them as unknown, ask
        by *older*, without them, now and from then on. *newer* None: nothing to send."""
        if newer is not None and fields not in self._refused:
            try:
                return await newer()
            except RequestRefused as refused:
                if "unknown field" not in str(refused):
                    raise
            self._refused.add(fields)
        return await older()

    async def begin(
        self, ctx: Context, crawl_id: int, url: str, finished: Finished, lead: float = 0.0
    ) -> Plan:
        # A tracker from before the lead holds and wakes pages as for a kept-alive host, so
        # a request to a host that closes its connections may miss a start it was given
        # when put aside, and take the host's next one.
        return await self._newest(
            "lead",
            (lambda: self._begin(ctx, crawl_id, url, finished, lead=min(lead, wire.LEAD_MAX)))
            if lead > 0
            else None,
            lambda: self._begin(ctx, crawl_id, url, finished),
        )

    async def _begin(
        self, ctx: Context, crawl_id: int, url: str, finished: Finished, **lead: float
    ) -> Plan:
        # No lead, no field: msgspec's omit_defaults leaves out only the default's own
        # 0.0 object, not any equal float, and a tracker from before refuses the field.
        request = wire.CrawlBeginRequest(
            crawl=crawl_id, url=url, item_id=ctx.id, attempt=ctx.attempt, finished=finished, **lead
        )
        return plan_from_wire(await self.connection.request("crawl.begin", request, wire.CrawlPlan))

    async def robots_fetched(
        self, ctx: Context, host: str, robots: tuple[int, str], not_before: float
    ) -> None:
        request = wire.RobotsRequest(
            host=host,
            status=robots[0],
            body=robots[1],
            not_before=not_before,
            item_id=ctx.id,
            attempt=ctx.attempt,
        )
        await self.connection.request_raw("crawl.robots", request)

    async def block(self, ctx: Context, host: str, until: float) -> None:
        request = wire.BlockRequest(host=host, until=self.permit_time(until))
        await self.connection.request_raw("crawl.block", request)

    async def host_failed(
        self, ctx: Context, crawl_id: int, url: str, grace: float
    ) -> float | None:
        host = urls.host(url)
        page = wire.HostFailedRequest(host=host, grace=grace, crawl=crawl_id, url=url)
        # To a tracker from before the page's fields, every error counts as the host's.
        return await self._newest(
            "page",
            lambda: self._host_failed(page),
            lambda: self._host_failed(wire.HostFailedRequest(host=host, grace=grace)),
        )

    async def _host_failed(self, request: wire.HostFailedRequest) -> float | None:
        reply = await self.connection.request("crawl.host_failed", request, wire.HostFailedReply)
        return reply.until

    async def payload(self, ctx: Context, crawl_id: int, digest: str) -> tuple[str, str] | None:
        request = wire.PayloadsRequest(crawl=crawl_id, digest=digest)
        reply = await self.connection.request("crawl.payloads", request, wire.PayloadsReply)
        return reply.payloads.get(digest)

    async def pace(
        self, ctx: Context, host: str, delay: float, after: float | None = None
    ) -> float | None:
        # A moved start must not pass before the answer is here: a round trip, twice over
        # for the tracker's own work and the network's jitter.
        lead = min(wire.LEAD_MAX, 2 * self.connection.round_trip)
        request = wire.PaceRequest(host=host, delay=delay, after=after, lead=lead)
        reply = await self.connection.request("crawl.pace", request, wire.PaceReply)
        return reply.start

    def local_time(self, moment: float) -> float:
        return moment - self.connection.offset

    def permit_time(self, moment: float) -> float:
        return moment + self.connection.offset

    async def close(self) -> None:
        """Nothing runs in the background: each request is the connection's."""


def robots_of(request: wire.RobotsRequest) -> Robots:
    return Robots(request.status, request.body)


# -- outcomes -----------------------------------------------------------------------------------

Short = Annotated[str, msgspec.Meta(max_length=10_000)]


class Record(msgspec.Struct, forbid_unknown_fields=True):
    """One row of ``crawl_attempts``, as a fetch attempt reports it."""

    crawl_id: int
    url: str
    attempt: int
    ruleset: int
    host: str
    started_at: float
    elapsed: float
    outcome: Annotated[str, msgspec.Meta(pattern="^(done|failed|retry|skipped|not-found)$")]
    status_code: int | None
    location: Short | None
    content_type: Short | None
    size: int | None
    outlinks: int
    outlinks_cut: Short | None
    error: Short | None
    digest: Short | None
    warc_file: Short | None
    warc_offset: int | None
    warc_length: int | None
    subrequests: int | None = None
    screenshot_file: Short | None = None
    screenshot_offset: int | None = None
    screenshot_length: int | None = None
    script_result: Annotated[str, msgspec.Meta(max_length=100_000)] | None = None


class FoundLink(msgspec.Struct, forbid_unknown_fields=True):
    url: Annotated[str, msgspec.Meta(max_length=2000)]
    hops: Annotated[int, msgspec.Meta(ge=0, le=1)] = 1
    skip: Short | None = None
    redirects: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 0


class Discovered(msgspec.Struct, forbid_unknown_fields=True):
    crawl_id: int
    parent: str | None
    found: list[FoundLink]


class FetchedBody(msgspec.Struct, forbid_unknown_fields=True):
    item_id: str
    attempt: int
    record: Record
    block: tuple[str, float] | None = None
    payload: tuple[int, str, str, str] | None = None
    discover: Discovered | None = None
    host_ok: str | None = None
    subpayloads: Annotated[
        list[tuple[int, Short, Short, Short]], msgspec.Meta(max_length=10_000)
    ] = []


class SkippedBody(msgspec.Struct, forbid_unknown_fields=True):
    crawl_id: int
    url: str
    reason: Short
    record: Record


class ParkedBody(msgspec.Struct, forbid_unknown_fields=True):
    item_id: str


def _page_of(attempt: wire.Attempt, crawl_id: int, url: str) -> None:
    """The outcome must be about the page the attempt was at."""
    if urls.page_id(crawl_id, url) != attempt.item_id:
        raise InvalidInput(
            f"an outcome for {url!r} of crawl {crawl_id} in the attempt at {attempt.item_id!r}"
        )


def _record(record: Record, attempt: wire.Attempt) -> dict[str, Any]:
    _page_of(attempt, record.crawl_id, record.url)
    if record.attempt != attempt.attempt:
        raise InvalidInput(f"a record of attempt {record.attempt} in attempt {attempt.attempt}")
    return msgspec.to_builtins(record)  # type: ignore[no-any-return]


def decode_fetched(body: Any, attempt: wire.Attempt) -> Fetched:
    got = msgspec.convert(body, FetchedBody)
    if (got.item_id, got.attempt) != (attempt.item_id, attempt.attempt):
        raise InvalidInput("a fetch outcome of another attempt")
    record = _record(got.record, attempt)
    crawl_id = got.record.crawl_id
    discover = None
    if got.discover is not None:
        if got.discover.crawl_id != crawl_id or got.discover.parent != got.record.url:
            raise InvalidInput("links found by another page than the one fetched")
        found = tuple(
            Found(url=f.url, hops=f.hops, skip=f.skip, redirects=f.redirects)
            for f in got.discover.found
        )
        discover = Discover(crawl_id=crawl_id, parent=got.discover.parent, found=found)
    if got.payload is not None and got.payload[0] != crawl_id:
        raise InvalidInput("a payload of another crawl")
    if any(p[0] != crawl_id for p in got.subpayloads):
        raise InvalidInput("a sub-request's payload of another crawl")
    return Fetched(
        item_id=got.item_id,
        attempt=got.attempt,
        record=record,
        block=got.block,
        payload=got.payload,
        discover=discover,
        host_ok=got.host_ok,
        subpayloads=tuple(got.subpayloads),
    )


def decode_skipped(body: Any, attempt: wire.Attempt) -> Skipped:
    got = msgspec.convert(body, SkippedBody)
    _page_of(attempt, got.crawl_id, got.url)
    return Skipped(
        crawl_id=got.crawl_id, url=got.url, reason=got.reason, record=_record(got.record, attempt)
    )


def decode_parked(body: Any, attempt: wire.Attempt) -> Parked:
    got = msgspec.convert(body, ParkedBody)
    if got.item_id != attempt.item_id:
        raise InvalidInput("parking another attempt's page")
    return Parked(item_id=got.item_id)
