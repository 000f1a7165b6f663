"""Prometheus gauges read from the database: what is queued, due, failing and crawled, for
every process that shares it. A scrape reuses the last reading for a few seconds, so
scraping every second costs a handful of aggregate queries every few seconds, not more.

Labels stay bounded: task names, job states, page states and consumer names, never items,
URLs or hosts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from trawl.store.gauges import Snapshot
from trawl.store.store import Store

CACHE_SECONDS = 5.0
_STATES = ("queued", "running", "done", "failed", "skipped")


class DbMetrics(Collector):
    """The database's gauges, refreshed at most every *cache_seconds* by :meth:`refresh`."""

    def __init__(self, *, cache_seconds: float = CACHE_SECONDS) -> None:
        self.cache_seconds = cache_seconds
        self.registry = CollectorRegistry(auto_describe=False)
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._read_at = -float("inf")
        self._now = 0.0
        self.registry.register(self)

    def refresh(self, store: Store) -> Snapshot:
        """Read the database unless the last reading is recent enough; the reading."""
        with self._lock:
            if self._snapshot is None or time.monotonic() - self._read_at >= self.cache_seconds:
                self._snapshot = store.gauges()
                self._now = store.clock()
                self._read_at = time.monotonic()
            return self._snapshot

    @property
    def last(self) -> Snapshot | None:
        """The last reading, however old, without reading anything (None before the first)."""
        return self._snapshot

    @property
    def age(self) -> float:
        """Seconds since the last reading (infinite before the first)."""
        return time.monotonic() - self._read_at

    @property
    def read_at(self) -> float:
        """The database's clock when the last reading was taken (0 before the first)."""
        return self._now

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot
        if snap is None:
            return
        jobs = GaugeMetricFamily("trawl_jobs", "Jobs by task and state.", labels=["task", "state"])
        due = GaugeMetricFamily("trawl_jobs_due", "Jobs due now, by task.", labels=["task"])
        oldest = GaugeMetricFamily(
            "trawl_oldest_due_seconds",
            "How long the longest-waiting due job of a task has been due.",
            labels=["task"],
        )
        failures = GaugeMetricFamily(
            "trawl_failures_unhandled", "Failures nobody has handled, by task.", labels=["task"]
        )
        paused = GaugeMetricFamily(
            "trawl_task_paused", "1 while a task is paused, else 0.", labels=["task"]
        )
        for t in snap.tasks:
            counts = (t.queued, t.running, t.done, t.failed, t.skipped)
            for state, count in zip(_STATES, counts, strict=True):
                jobs.add_metric([t.task, state], count)
            due.add_metric([t.task], t.due_now)
            failures.add_metric([t.task], t.unhandled_failures)
            paused.add_metric([t.task], 1 if t.paused else 0)
            since = snap.oldest_due.get(t.task)
            oldest.add_metric([t.task], max(0.0, self._now - since) if since is not None else 0)
        yield from (jobs, due, oldest, failures, paused)
        pages = GaugeMetricFamily(
            "trawl_crawl_pages", "Crawl pages by the state of their fetch.", labels=["state"]
        )
        for state, count in sorted(snap.pages.items()):
            pages.add_metric([state], count)
        yield pages
        yield GaugeMetricFamily(
            "trawl_hosts_throttled",
            "Crawled hosts a request must wait for (politeness delay or a block).",
            value=snap.hosts_throttled,
        )
        yield GaugeMetricFamily(
            "trawl_hosts_blocked",
            "Crawled hosts held back by a 429/503 or a run of errors.",
            value=snap.hosts_blocked,
        )
        lag = GaugeMetricFamily(
            "trawl_journal_consumer_lag",
            "Journal entries a named consumer has not acknowledged.",
            labels=["consumer"],
        )
        for c in snap.consumers:
            lag.add_metric([c.name], c.lag)
        yield lag
