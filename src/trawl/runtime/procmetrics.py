"""Prometheus metrics of the processes that run tasks (``--metrics-port``): claims,
commits by outcome, attempt durations, lease losses and stale commits, labelled by task.

A built-in plugin fills them from the job hooks. Under ``trawl run`` the actors are child
processes: each writes its samples to a directory the orchestrator made
(prometheus-client's multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``), and the
orchestrator's port serves them added up.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from trawl.model.records import AttemptResult, ClaimedJob
from trawl.runtime.actor.spec import ActorInfo
from trawl.runtime.plugins import hookimpl

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

MULTIPROC = "PROMETHEUS_MULTIPROC_DIR"  # prometheus-client reads it when first imported
# attempt durations from 5 ms to 10 minutes: fetches, scrapes, and slow exports
BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class ProcessMetrics:
    """The plugin: counters and a histogram per task, in the default registry."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self.claimed = Counter("trawl_jobs_claimed", "Jobs leased by this process.", ["task"])
        self.committed = Counter(
            "trawl_jobs_committed", "Attempts committed, by outcome.", ["task", "outcome"]
        )
        self.duration = Histogram(
            "trawl_attempt_seconds", "How long attempts ran.", ["task"], buckets=BUCKETS
        )
        self.lease_lost = Counter(
            "trawl_leases_lost", "Leases found gone while the attempt still ran.", ["task"]
        )
        self.stale = Counter(
            "trawl_commits_stale", "Commits rejected: the attempt had lost its lease.", ["task"]
        )
        self._started: dict[tuple[int, int], float] = {}

    @hookimpl
    def trawl_job_claimed(self, job: ClaimedJob) -> None:
        self.claimed.labels(job.task).inc()

    @hookimpl
    def trawl_actor_tick_start(self, job: ClaimedJob) -> None:
        self._started[(job.job_id, job.attempt)] = time.monotonic()

    @hookimpl
    def trawl_actor_tick_end(self, job: ClaimedJob) -> None:
        started = self._started.pop((job.job_id, job.attempt), None)
        if started is not None:
            self.duration.labels(job.task).observe(time.monotonic() - started)

    @hookimpl
    def trawl_job_done(self, job: AttemptResult) -> None:
        self.committed.labels(job.task, "done").inc()

    @hookimpl
    def trawl_job_failed(self, job: AttemptResult) -> None:
        self.committed.labels(job.task, "failed").inc()

    @hookimpl
    def trawl_job_released(self, job: AttemptResult) -> None:
        self.committed.labels(job.task, "released").inc()

    @hookimpl
    def trawl_job_deferred(self, job: AttemptResult) -> None:
        self.committed.labels(job.task, "deferred").inc()

    @hookimpl
    def trawl_job_skipped(self, job: AttemptResult) -> None:
        self.committed.labels(job.task, "skipped").inc()

    @hookimpl
    def trawl_job_stale(self, job: AttemptResult) -> None:
        self.stale.labels(job.task).inc()

    @hookimpl
    def trawl_job_lease_lost(self, job: ClaimedJob) -> None:
        self.lease_lost.labels(job.task).inc()

    @hookimpl
    def trawl_actor_exited(self, actor: ActorInfo) -> None:
        # An actor's samples stay in the directory; its live gauges (none here) would not.
        if os.environ.get(MULTIPROC) and actor.pid:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(actor.pid)  # type: ignore[no-untyped-call]


def serve(port: int, host: str = "127.0.0.1") -> None:
    """Expose this process's metrics (and, in multiprocess mode, its actors') on *port*."""
    from prometheus_client import start_http_server

    directory = os.environ.get(MULTIPROC)
    if directory:
        start_http_server(port, addr=host, registry=actors_registry(directory))
    else:
        start_http_server(port, addr=host)


def actors_registry(directory: str) -> CollectorRegistry:
    """A registry serving the samples every process wrote to *directory*, added up."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(_Samples(directory))
    return registry


class _Samples:
    """prometheus-client's MultiProcessCollector, leaving out a sample file that is still
    empty. The library creates a process's file before it sizes it, and reading it in that
    instant fails the whole scrape (prometheus/client_python#1199): a scrape as an actor
    started served a 500 instead of the metrics, and an actor killed in that instant (as the
    orchestrator kills a stuck one) would leave the file empty, and every scrape failing,
    for good. A sized file reads as zeros until its first sample: nothing to leave out."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def collect(self) -> Iterable[Metric]:
        from prometheus_client import multiprocess

        files = [str(f) for f in sorted(self.directory.glob("*.db")) if _size(f) > 0]
        metrics: Iterable[Metric] = multiprocess.MultiProcessCollector.merge(files)  # type: ignore[no-untyped-call]
        return metrics


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # a live gauge's file, removed as its process died
        return 0


def multiprocess_dir() -> Path:
    """A fresh directory for the samples of an orchestrator and its actors, set in the
    environment the actors inherit. Call before anything imports prometheus_client."""
    path = Path(tempfile.mkdtemp(prefix="trawl-metrics-"))
    os.environ[MULTIPROC] = str(path)
    atexit.register(shutil.rmtree, path, ignore_errors=True)  # the samples die with it
    return path
