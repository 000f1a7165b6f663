"""Where a fetch attempt asks for its politeness permit and tells what it learned of a host:
the database, in short transactions of the worker's own (:class:`LocalPort`), or a tracker
that does the same transactions for a remote pipeline (crawl/remote.py). Either way every
fetcher shares one per-host delay, concurrency and block."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Generic, Protocol, TypeVar, cast

from trawl.crawl import urls
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
from trawl.store.store import Store

log = logging.getLogger("trawl.crawl")

K = TypeVar("K")
R = TypeVar("R")
Finished = list[tuple[str, int]]  # (item id, attempt) of requests done, slots not yet freed


class Port(Protocol):
    async def begin(
        self, ctx: Context, crawl_id: int, url: str, finished: Finished, lead: float = 0.0
    ) -> Plan:
        """Plan *ctx*'s attempt at *url*: fetch (when), robots.txt first, defer, skip or park.
        *lead*: how long before its start the request would be begun (politeness.Ask)."""

    async def robots_fetched(
        self, ctx: Context, host: str, robots: tuple[int, str], not_before: float
    ) -> None:
        """Keep *host*'s robots.txt for everyone; its next request not before *not_before*."""

    async def block(self, ctx: Context, host: str, until: float) -> None:
        """Hold off every request to *host* until *until* (a 429, a 503 with Retry-After)."""

    async def host_failed(
        self, ctx: Context, crawl_id: int, url: str, grace: float
    ) -> float | None:
        """A host-level error at the page *url*: until when the page waits without spending
        a try, or None (:func:`~trawl.crawl.politeness.host_failed`)."""

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
        self._plans = plan_batcher(gate)
        self._payloads = payload_batcher()

    async def begin(
        self, ctx: Context, crawl_id: int, url: str, finished: Finished, lead: float = 0.0
    ) -> Plan:
        ask = Ask(
            crawl_id=crawl_id,
            url=url,
            item_id=ctx.id,
            attempt=ctx.attempt,
            finished=tuple(finished),
            lead=lead,
        )
        return await self._plans.ask(ctx.with_store, ask)

    async def close(self) -> None:
        await self._plans.close()
        await self._payloads.close()

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

    async def host_failed(
        self, ctx: Context, crawl_id: int, url: str, grace: float
    ) -> float | None:
        call = partial(host_failed, host=urls.host(url), grace=grace, crawl_id=crawl_id, url=url)
        return await ctx.with_store(call)

    async def payload(self, ctx: Context, crawl_id: int, digest: str) -> tuple[str, str] | None:
        return await self._payloads.ask(ctx.with_store, (crawl_id, digest))

    async def pace(
        self, ctx: Context, host: str, delay: float, after: float | None = None
    ) -> float | None:
        return await ctx.with_store(partial(pace_host, host=host, delay=delay, after=after))

    def local_time(self, moment: float) -> float:
        return moment

    def permit_time(self, moment: float) -> float:
        return moment


# Where a batch goes: what runs a function on a store - a worker context's
# ``with_store`` (its database thread), or a tracker's ``Stores.run`` (server/stores.py).
Via = Callable[[Callable[[Store], list[R]]], Awaitable[list[R]]]


class Batcher(Generic[K, R]):
    """Asks made while the database thread is busy are answered together, in one call on
    it: the plans the fetches a claim starts ask for at once (each transaction costs a hop
    to the database thread, SQLite's writer lock, a BEGIN and a COMMIT, however many plans
    it holds), or the first copies of the payloads pages just fetched (each query a round
    trip to PostgreSQL, and the database thread serves the process's commits and claims
    too). *many* answers a list of asks, an answer for each, in order, on the database
    thread. One task, owned here, runs the batches; each asker awaits its own answer. A
    batch that fails is asked again one at a time, so an ask that cannot be answered
    fails only its own attempt."""

    def __init__(self, many: Callable[[Store, list[K]], list[R]], name: str) -> None:
        self.many = many
        self.name = name
        self._asks: list[tuple[K, Via[R], asyncio.Future[R]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def ask(self, via: Via[R], key: K) -> R:
        answer: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._asks.append((key, via, answer))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._serve(), name=self.name)
        return await answer

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for _, _, answer in self._asks:  # asked before the task ever ran
            answer.cancel()
        self._asks = []

    async def _serve(self) -> None:
        batch: list[tuple[K, Via[R], asyncio.Future[R]]] = []
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._asks:
                    batch, self._asks = self._asks, []
                    await self._run([a for a in batch if not a[2].done()])
        finally:  # closed (or a bug): nobody is left waiting for an answer that will not come
            for _, _, answer in batch + self._asks:
                answer.cancel()
            self._asks = []

    async def _run(self, batch: list[tuple[K, Via[R], asyncio.Future[R]]]) -> None:
        if not batch:
            return
        via = batch[0][1]  # every asker of one batcher reaches the same database
        try:
            keys = [key for key, _, _ in batch]
            answers = await via(lambda store: self.many(store, keys))
        except Exception:
            if len(batch) == 1:
                _settle(batch[0][2], None, sys.exc_info()[1])
                return
            log.debug("a batch of %d %s asks failed: asking one by one", len(batch), self.name)
            for one in batch:
                await self._run([one])
            return
        for (_, _, answer), found in zip(batch, answers, strict=True):
            _settle(answer, found, None)


def plan_batcher(gate: Gate) -> Batcher[Ask, Plan]:
    """The batcher of *gate*'s plans."""

    def many(store: Store, keys: list[Ask]) -> list[Plan]:
        return gate.begin_many(store, keys)

    return Batcher(many, "trawl-gate")


def payload_batcher() -> Batcher[tuple[int, str], tuple[str, str] | None]:
    """The batcher of first-copy lookups: (crawl, digest) -> (url, WARC-Date) or None."""
    return Batcher(first_copies, "trawl-payloads")


def first_copies(store: Store, keys: list[tuple[int, str]]) -> list[tuple[str, str] | None]:
    """(url, WARC-Date) of each (crawl, digest)'s first archived copy, if any: one query
    for each crawl the keys name."""
    digests: dict[int, list[str]] = {}
    for crawl_id, digest in keys:
        digests.setdefault(crawl_id, []).append(digest)
    found = {
        (crawl_id, digest): first
        for crawl_id, named in digests.items()
        for digest, first in store.crawls.payloads_of(crawl_id, named).items()
    }
    return [found.get(key) for key in keys]


def _settle(answer: asyncio.Future[R], found: R | None, error: BaseException | None) -> None:
    if answer.done():  # its attempt was cancelled while it waited (a timeout, shutdown)
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(cast(R, found))
