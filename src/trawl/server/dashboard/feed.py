"""The live feed: one reader of the database per server process for every open page.

Every couple of seconds the feed reads what the watched pages show (a topic: the overview,
the crawl list, one crawl, the journal) once, renders each piece once, and hands the same
text to every page watching that topic over Server-Sent Events. A hundred open pages cost
what one costs. A page that reads slowly gets the newest piece, never a growing queue.

It also counts the journal's finished jobs per task into short buckets, so the overview's
rate chart needs no query of its own: only entries committed since the last look are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from trawl.model.records import JournalEntry
from trawl.model.states import Journal
from trawl.runtime.dbmetrics import DbMetrics
from trawl.server.dashboard import figures
from trawl.server.stores import Stores
from trawl.store.activity import JournalFlow
from trawl.store.store import Store

log = logging.getLogger("trawl.server.dashboard")

REFRESH = 2.0  # seconds between reads while anyone watches
BUCKET = 10.0  # seconds per bucket of the rate chart
BUCKETS = 60  # ten minutes of rate
TAIL = 200  # journal entries a slow page may have waiting; older ones are dropped
FINISHED = (Journal.JOB_DONE.value, Journal.JOB_FAILED.value)

Render = Callable[["Reading", "Rates"], dict[str, str]]


class Rates:
    """Finished jobs (done or failed) per task in buckets of BUCKET seconds."""

    def __init__(self, started: float) -> None:
        self.started = started
        self._buckets: dict[str, dict[int, int]] = {}

    def add(self, at: float, flow: JournalFlow) -> None:
        slot = int(at // BUCKET)
        for (task, kind), n in flow.counts.items():
            if task is not None and kind in FINISHED:
                buckets = self._buckets.setdefault(task, {})
                buckets[slot] = buckets.get(slot, 0) + n
                for old in [s for s in buckets if s <= slot - BUCKETS]:
                    del buckets[old]

    def series(self, task: str, now: float) -> list[float]:
        """Jobs per second in each finished bucket of the last BUCKETS, oldest first,
        starting no earlier than the feed did."""
        current = int(now // BUCKET)
        first = max(current - BUCKETS, int(self.started // BUCKET))
        buckets = self._buckets.get(task, {})
        return [buckets.get(s, 0) / BUCKET for s in range(first, current)]

    def rate(self, task: str, now: float) -> float:
        """Jobs per second over the last finished bucket."""
        return self._buckets.get(task, {}).get(int(now // BUCKET) - 1, 0) / BUCKET


class Subscriber:
    """One open page: the newest piece per event name, and journal entries not yet sent."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.pieces: dict[str, str] = {}
        self.entries: deque[JournalEntry] = deque(maxlen=TAIL)
        self.closed = False
        self._ready = asyncio.Event()

    def offer(self, pieces: dict[str, str], entries: list[JournalEntry]) -> None:
        self.pieces.update(pieces)
        self.entries.extend(entries)
        if pieces or entries:
            self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def wait(self, within: float) -> tuple[dict[str, str], list[JournalEntry]]:
        """What arrived since the last call (empty after *within* seconds of nothing)."""
        # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that lands as
        # the event fires (see runtime/worker.py's _wait), and a closed page's feed ran on.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._ready.wait()
        self._ready.clear()
        pieces, self.pieces = self.pieces, {}
        entries = list(self.entries)
        self.entries.clear()
        return pieces, entries


@dataclass(kw_only=True)
class Reading:
    """What one look at the database found, for the topics watched at that moment."""

    at: float
    flow: JournalFlow
    entries: list[JournalEntry] = field(default_factory=list)
    overview: figures.Overview | None = None
    crawl_list: figures.CrawlList | None = None
    crawls: dict[int, figures.CrawlFigures] = field(default_factory=dict)
    error: str | None = None


def crawl_topic(crawl_id: int) -> str:
    return f"crawl:{crawl_id}"


class Feed:
    """Owns the reading task (started and stopped with the application)."""

    def __init__(
        self, stores: Stores, gauges: DbMetrics, render: Render, *, refresh: float = REFRESH
    ) -> None:
        self.stores = stores
        self.gauges = gauges
        self.render = render
        self.refresh = refresh
        self.rates = Rates(time.time())
        self.reads = 0  # looks at the database so far (the tests count them)
        self.last_error: str | None = None
        self._subscribers: dict[str, set[Subscriber]] = {}
        self._latest: dict[str, dict[str, str]] = {}  # topic -> the pieces last sent
        self._seq: int | None = None
        self._kick = asyncio.Event()
        self._ticked = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        self._stopping = False
        self._kick.set()  # the first look at once: it warms the gauges for the first page
        self._task = asyncio.create_task(self._run(), name="dashboard-feed")

    async def stop(self) -> None:
        """End every stream, then let a read in progress finish: cancelling it would leave
        its thread using a connection the server is about to close."""
        self._stopping = True
        for subscribers in self._subscribers.values():
            for subscriber in subscribers:
                subscriber.close()
        self._kick.set()
        if self._task is not None:
            await self._task
            self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def subscribe(self, topic: str) -> Subscriber:
        """A new watcher of *topic*, given the pieces last sent to that topic at once."""
        subscriber = Subscriber(topic)
        self._subscribers.setdefault(topic, set()).add(subscriber)
        subscriber.offer(dict(self._latest.get(topic, {})), [])
        self._kick.set()  # a topic nobody watched is read now, not at the next tick
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        watchers = self._subscribers.get(subscriber.topic)
        if watchers is not None:
            watchers.discard(subscriber)
            if not watchers:
                del self._subscribers[subscriber.topic]
                self._latest.pop(subscriber.topic, None)

    def watchers(self, topic: str) -> int:
        return len(self._subscribers.get(topic, ()))

    async def _run(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.refresh):  # not wait_for, as in wait()
                    await self._kick.wait()
            self._kick.clear()
            if not self._stopping:
                await self.tick()

    async def tick(self) -> None:
        """One look at the database for every watched topic; a failure is shown on the
        pages (and logged once) and the next tick tries again."""
        topics = set(self._subscribers)
        try:
            reading = await self.stores.run(lambda store: self._read(store, topics))
        except Exception as error:
            message = f"{type(error).__name__}: {error}"[:300]
            if message != self.last_error:
                log.warning("the dashboard feed could not read the database: %s", message)
            self.last_error = message
            reading = Reading(at=time.time(), flow=JournalFlow(last=0, counts={}), error=message)
        else:
            self.last_error = None
            self.rates.add(reading.at, reading.flow)
        self.reads += 1
        self._publish(reading)
        ticked, self._ticked = self._ticked, asyncio.Event()
        ticked.set()

    async def ticked(self) -> None:
        """Until the next look at the database has been published."""
        await self._ticked.wait()

    def _read(self, store: Store, topics: set[str]) -> Reading:
        with store.read():
            upto = store.activity.last_seq()
            after = upto if self._seq is None else min(self._seq, upto)
            flow = store.activity.flow(after, upto)
            entries: list[JournalEntry] = []
            if "journal" in topics and upto > after:
                newest = store.activity.recent(before=upto + 1, window=upto - after, limit=TAIL)
                entries = newest[::-1]
        self._seq = upto
        reading = Reading(at=store.clock(), flow=flow, entries=entries)
        if "overview" in topics or self.reads == 0:  # the first look warms the gauges
            reading.overview = figures.overview(store, self.gauges)
        if "crawls" in topics:
            reading.crawl_list = figures.crawl_list(store, self.gauges)
        for topic in topics:
            if topic.startswith("crawl:"):
                crawl_id = int(topic.removeprefix("crawl:"))
                reading.crawls[crawl_id] = figures.crawl(store, crawl_id)
        return reading

    def _publish(self, reading: Reading) -> None:
        pieces = self.render(reading, self.rates)
        for topic, subscribers in list(self._subscribers.items()):
            sent = self._latest.setdefault(topic, {})
            # only what changed goes out: an idle page gets nothing but keep-alives
            changed = {k: v for k, v in _for_topic(pieces, topic).items() if sent.get(k) != v}
            sent.update(changed)
            entries = reading.entries if topic == "journal" else []
            for subscriber in subscribers:
                subscriber.offer(changed, entries)


def _for_topic(pieces: dict[str, str], topic: str) -> dict[str, str]:
    """The pieces keyed ``topic/event`` or ``*/event``, by event."""
    out = {}
    for key, text in pieces.items():
        owner, _, event = key.partition("/")
        if owner in (topic, "*"):
            out[event] = text
    return out
