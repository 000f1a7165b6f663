"""The crawls a pipeline's claims take pages of, read at most once a second.

A claim for a crawl pipeline routes its slots over the crawls in the database: every crawl
row is read and each one's options parsed. Crawls stay in the database once finished, so
that cost grows with every crawl ever run: with 500 crawls kept it was 8-9 ms of the
tracker's time a claim (4-5 ms reading the rows, 3.8 ms parsing their options), and a
pipeline of 16 slots claims several times a second. The list is reused for :data:`FRESH`
seconds, per routing (a re-routed pipeline reads it again at once).

What that delays is harmless: a crawl created, resumed or given concurrency again has its
pages claimed up to that much later; a crawl aborted meanwhile has its pages parked (not
claimable) by the abort itself, and the gate checks the crawl's row again at each fetch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from trawl.server.pipelines.routing import Routing
from trawl.store.store import Store

FRESH = 1.0  # seconds a pipeline's routed crawls are reused between claims


@dataclass(frozen=True, slots=True)
class Routed:
    pinned: list[int]  # the pinned crawl, if it is active
    crawls: list[int]  # the crawls the unpinned slots may take, best first


class RoutedCrawls:
    """One pipeline's routed crawls, read again once :data:`FRESH` seconds old."""

    def __init__(self, fresh: float = FRESH, clock: Callable[[], float] = time.monotonic):
        self.fresh = fresh
        self.clock = clock
        self._cached: tuple[Routing, float, Routed] | None = None

    def of(self, store: Store, routing: Routing) -> Routed:
        now = self.clock()
        cached = self._cached
        if cached is not None and cached[0] is routing and now - cached[1] < self.fresh:
            return cached[2]
        with store.read():
            rows = store.crawls.all()
        routed = Routed(pinned=routing.pinned_crawl(rows), crawls=routing.crawls(rows))
        self._cached = (routing, now, routed)
        return routed
