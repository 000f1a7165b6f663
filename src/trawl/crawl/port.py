"""Where a fetch attempt asks for its politeness permit and tells what it learned of a host:
the database, in short transactions of the worker's own (:class:`LocalPort`), or a tracker
that does the same transactions for a remote pipeline (crawl/remote.py). Either way every
fetcher shares one per-host delay, concurrency and block."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from functools import partial
from typing import Protocol

from trawl.crawl.politeness import (
    Ask,
    Gate,
    Plan,
    block_host,
    host_failed,
    pace_host,
    store_robots,
)
from trawl.crawl.robots import Robots
from trawl.runtime.context import Context

log = logging.getLogger("trawl.crawl")

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

    async def pace(
        self, ctx: Context, host: str, delay: float, after: float | None = None
    ) -> float | None:
        """When a request beyond its attempt's own permit (a browser's sub-request, a
        request that missed its start *after*) may start on *host*, on the permit's clock
        (None: the host is blocked); :func:`~trawl.crawl.politeness.pace_host`."""

    def local_time(self, moment: float) -> float:
        """*moment* of the permit's clock on this machine's clock."""

    def permit_time(self, moment: float) -> float:
        """*moment* of this machine's clock on the permit's clock."""

    async def close(self) -> None:
        """Stop what the port runs in the background (the fetches have ended)."""


class LocalPort:
    """The database, through the worker's store thread (``ctx.with_store``)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self._plans = Batcher(gate)

    async def begin(self, ctx: Context, crawl_id: int, url: str, finished: Finished) -> Plan:
        ask = Ask(
            crawl_id=crawl_id,
            url=url,
            item_id=ctx.id,
            attempt=ctx.attempt,
            finished=tuple(finished),
        )
        return await self._plans.plan(ctx, ask)

    async def close(self) -> None:
        await self._plans.close()

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

    async def pace(
        self, ctx: Context, host: str, delay: float, after: float | None = None
    ) -> float | None:
        return await ctx.with_store(partial(pace_host, host=host, delay=delay, after=after))

    def local_time(self, moment: float) -> float:
        return moment

    def permit_time(self, moment: float) -> float:
        return moment


class Batcher:
    """Plans asked for while the database thread is busy are made together, in one
    transaction: the fetches a claim starts ask at once, and each transaction costs a
    hop to the database thread, SQLite's writer lock, a BEGIN and a COMMIT, however many
    plans it holds. One task, owned here, runs the batches; each asker awaits its own
    plan. A batch that fails is made again one plan at a time, so a plan that cannot be
    made fails only its own attempt."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self._asks: list[tuple[Ask, Context, asyncio.Future[Plan]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def plan(self, ctx: Context, ask: Ask) -> Plan:
        planned: asyncio.Future[Plan] = asyncio.get_running_loop().create_future()
        self._asks.append((ask, ctx, planned))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._serve(), name="trawl-gate")
        return await planned

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for _, _, planned in self._asks:  # asked before the task ever ran
            planned.cancel()
        self._asks = []

    async def _serve(self) -> None:
        batch: list[tuple[Ask, Context, asyncio.Future[Plan]]] = []
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._asks:
                    batch, self._asks = self._asks, []
                    await self._run([a for a in batch if not a[2].done()])
        finally:  # closed (or a bug): nobody is left waiting for a plan that will not come
            for _, _, planned in batch + self._asks:
                planned.cancel()
            self._asks = []

    async def _run(self, batch: list[tuple[Ask, Context, asyncio.Future[Plan]]]) -> None:
        if not batch:
            return
        ctx = batch[0][1]  # every context of this process reaches the same database thread
        try:
            asks = [ask for ask, _, _ in batch]
            plans = await ctx.with_store(partial(self.gate.begin_many, asks=asks))
        except Exception:
            if len(batch) == 1:
                _settle(batch[0][2], None, sys.exc_info()[1])
                return
            log.debug("a batch of %d plans failed: making them one by one", len(batch))
            for one in batch:
                await self._run([one])
            return
        for (_, _, planned), plan in zip(batch, plans, strict=True):
            _settle(planned, plan, None)


def _settle(planned: asyncio.Future[Plan], plan: Plan | None, error: BaseException | None) -> None:
    if planned.done():  # its attempt was cancelled while it waited (a timeout, shutdown)
        return
    if error is not None:
        planned.set_exception(error)
    elif plan is not None:
        planned.set_result(plan)
