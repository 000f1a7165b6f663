"""Requests a worker process has in flight per crawl, kept to the crawl's concurrency.

A crawl's concurrency counts requests in flight, but a page's job also waits for its plan,
is parsed, archived and committed: with one worker slot a request, a crawl of the demo
site at ``--concurrency 16`` had on average eight of its sixteen slots busy, fewer of them
with a request out. So a
worker running a crawl has more slots than the crawl has requests (``trawl crawl`` gives it
:data:`SLOTS_PER_REQUEST` a request), and its fetches queue here for a request before they
ask the politeness gate for one: the gate, which counts every process's requests, would
otherwise refuse the surplus and each refusal is a deferral (a commit, and a claim again
later). The gate stays the authority across processes; this only keeps one process from
asking for more than the crawl allows. Processes started together on one crawl (``trawl
crawl --processes N``) each keep to their *share* of it, a N-th rounded up, for the same
reason: two processes each asking for all sixteen requests of a crawl had half their asks
refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

SLOTS_PER_REQUEST = 2  # worker slots `trawl crawl` runs per request the crawl allows


class _Crawl:
    __slots__ = ("held", "limit", "waiting")

    def __init__(self) -> None:
        self.limit = 0  # not known yet (no plan seen), or paused: the gate decides alone
        self.held = 0
        self.waiting: deque[asyncio.Future[None]] = deque()


class Permit:
    """One request of a crawl in flight; :meth:`release` it once the request is done
    (releasing twice is harmless, so every way out of a fetch may do it)."""

    __slots__ = ("_crawl", "_owner")

    def __init__(self, owner: InFlight, crawl: _Crawl) -> None:
        self._owner: InFlight | None = owner
        self._crawl = crawl

    def release(self) -> None:
        if self._owner is not None:
            self._owner._release(self._crawl)
            self._owner = None


class InFlight:
    """Per crawl: requests in flight in this process, and fetches waiting, first come first
    served, for one to finish."""

    def __init__(self, share: int = 1) -> None:
        if share < 1:
            raise ValueError(f"a process's share of a crawl is 1/N for N >= 1, not 1/{share}")
        self.share = share  # processes sharing each crawl's requests evenly
        self._crawls: dict[int, _Crawl] = {}

    def limit(self, crawl_id: int, concurrency: int) -> None:
        """The crawl's concurrency as its latest plan said (it can be changed while the
        crawl runs); 0 or less: no limit here."""
        crawl = self._crawls.setdefault(crawl_id, _Crawl())
        mine = -(-concurrency // self.share) if concurrency > 0 else concurrency
        if crawl.limit != mine:
            crawl.limit = mine
            self._wake(crawl)

    def held(self, crawl_id: int) -> int:
        crawl = self._crawls.get(crawl_id)
        return 0 if crawl is None else crawl.held

    async def acquire(self, crawl_id: int, within: float | None = None) -> Permit | None:
        """A request of the crawl's, once one is free; ``None`` if none came *within* that
        many seconds (the fetch then steps back as the gate would have had it: a worker
        with many more slots than the crawl's concurrency on a slow site must not have its
        pages time out in this queue)."""
        crawl = self._crawls.setdefault(crawl_id, _Crawl())
        if not crawl.waiting and _room(crawl):
            crawl.held += 1
            return Permit(self, crawl)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        crawl.waiting.append(turn)
        try:
            async with asyncio.timeout(within):
                await turn
        except TimeoutError:
            if turn.done() and not turn.cancelled():  # handed one as the time ran out
                return Permit(self, crawl)
            _forget(crawl, turn)
            return None
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed a request, then cancelled
                self._release(crawl)
            else:
                _forget(crawl, turn)
            raise
        return Permit(self, crawl)

    def _release(self, crawl: _Crawl) -> None:
        crawl.held -= 1
        self._wake(crawl)

    def _wake(self, crawl: _Crawl) -> None:
        while crawl.waiting and _room(crawl):
            turn = crawl.waiting.popleft()
            if not turn.done():
                crawl.held += 1  # handed over: counted before the waiter runs
                turn.set_result(None)


def _forget(crawl: _Crawl, turn: asyncio.Future[None]) -> None:
    with contextlib.suppress(ValueError):  # already taken off by a release that skipped it
        crawl.waiting.remove(turn)


def _room(crawl: _Crawl) -> bool:
    return crawl.limit <= 0 or crawl.held < crawl.limit
