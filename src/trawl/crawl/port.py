"""Where a fetch attempt asks for its politeness permit and tells what it learned of a host:
the database, in short transactions of the worker's own (:class:`LocalPort`), or a tracker
that does the same transactions for a remote pipeline (crawl/remote.py). Either way every
fetcher shares one per-host delay, concurrency and block."""

from __future__ import annotations

from functools import partial
from typing import Protocol

from trawl.crawl.politeness import Gate, Plan, block_host, host_failed, pace_host, store_robots
from trawl.crawl.robots import Robots
from trawl.runtime.context import Context

Finished = list[tuple[str, int]]  # (item id, attempt) of requests done, slots not yet freed


class Port(Protocol):
    async def begin(self, ctx: Context, crawl_id: int, url: str, finished: Finished) -> Plan:
        """Plan *ctx*'s attempt at *url*: fetch (when), robots.txt first, defer, skip or park."""

    async def robots_fetched(
        self, ctx: Context, host: str, robots: tuple[int, str], not_before: float
    ) -> None:
        """Keep *host*'s robots.txt for everyone; its next request not before *not_before*."""

    async def block(self, ctx: Context, host: str, until: float) -> None:
        """Hold off every request to *host* until *until* (a 429, a 503 with Retry-After)."""

    async def host_failed(self, ctx: Context, host: str, grace: float) -> float | None:
        """A host-level error: until when the page waits without spending a try, or None."""

    async def payload(self, ctx: Context, crawl_id: int, digest: str) -> tuple[str, str] | None:
        """(url, date) of the first archived copy of the payload *digest* in the crawl."""

    async def pace(self, ctx: Context, host: str, delay: float) -> float | None:
        """When a browser's sub-request to *host* may start (None: the host is blocked)."""

    def local_time(self, moment: float) -> float:
        """*moment* of the permit's clock on this machine's clock."""

    def permit_time(self, moment: float) -> float:
        """*moment* of this machine's clock on the permit's clock."""


class LocalPort:
    """The database, through the worker's store thread (``ctx.with_store``)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def begin(self, ctx: Context, crawl_id: int, url: str, finished: Finished) -> Plan:
        plan = partial(
            self.gate.begin,
            crawl_id=crawl_id,
            url=url,
            item_id=ctx.id,
            attempt=ctx.attempt,
            finished=finished,
        )
        return await ctx.with_store(plan)

    async def robots_fetched(
        self, ctx: Context, host: str, robots: tuple[int, str], not_before: float
    ) -> None:
        keep = partial(
            store_robots,
            host=host,
            robots=robots,
            not_before=not_before,
            item_id=ctx.id,
            attempt=ctx.attempt,
        )
        await ctx.with_store(keep)
        self.gate.learned_robots(host, Robots(*robots))

    async def block(self, ctx: Context, host: str, until: float) -> None:
        await ctx.with_store(partial(block_host, host=host, until=until))

    async def host_failed(self, ctx: Context, host: str, grace: float) -> float | None:
        return await ctx.with_store(partial(host_failed, host=host, grace=grace))

    async def payload(self, ctx: Context, crawl_id: int, digest: str) -> tuple[str, str] | None:
        return await ctx.with_store(lambda store: store.crawls.payload(crawl_id, digest))

    async def pace(self, ctx: Context, host: str, delay: float) -> float | None:
        return await ctx.with_store(partial(pace_host, host=host, delay=delay))

    def local_time(self, moment: float) -> float:
        return moment

    def permit_time(self, moment: float) -> float:
        return moment
