"""Keeping an external executor's queues filled (swh-scheduler's runner, for any broker).

For each queue, in a loop: take back the jobs a feeder claimed but never recorded as
published (they are published again, as the same attempt) and settle lapsed leases as
crashed attempts; read the queue's live length from the broker (or the jobs published and
not yet committed, if more: they include the messages workers hold unacknowledged); with
less than 5 % of the cap free, wait (60 s by default, plus 0-5 s of splay so feeders do
not beat together); otherwise claim that many due jobs (split by the task's visit-policy
weights, within its rate limits), publish them, and record them as queued. Nothing due:
wait until the next job becomes due (at most the idle wait), or until the database says
work was added (PostgreSQL's NOTIFY).

Between the claim and the record a job is ``claimed``: a feeder killed there leaves jobs
that may or may not be in the broker. Their short lease lapses and a feeder publishes them
again with the same attempt; a copy already queued is dropped by the executor's worker,
which takes a job only once per attempt. So the queue never holds more than the cap, and
no job is lost or committed twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from trawl.engine import claim as engine_claim
from trawl.model.errors import DatabaseUnavailable, InvalidInput, TrawlError
from trawl.runtime.app import App, TaskDef
from trawl.runtime.settle import sweep_lapsed
from trawl.store.notify import Listener
from trawl.store.store import Store

log = logging.getLogger("trawl.feed")

MIN_FREE = 0.05  # below this share of the cap free, the queue counts as full
SAY_EVERY = 60.0  # seconds between the feeder's log lines of what it did


class Broker(Protocol):
    """What a feeder needs of an executor's broker."""

    executor: str  # "celery"

    def length(self, queue: str) -> int:
        """Messages waiting in *queue* now (declaring it if it does not exist yet)."""
        ...

    def publish(self, queue: str, task: str, jobs: Sequence[tuple[int, int]]) -> None:
        """Publish one message per (job id, attempt) for *task* to *queue*."""
        ...


class FeederTaken(TrawlError):
    """Another feeder holds the queue."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FeedOptions:
    cap: int  # the most messages a queue may hold
    full_wait: float = 60.0  # seconds to wait when the queue is (nearly) full
    splay: float = 5.0  # up to this many seconds more, at random
    idle_wait: float = 300.0  # seconds to wait when nothing is due (a NOTIFY cuts it short)
    queue_lease: float = 3600.0  # how long a published job may wait in the broker
    publish_lease: float = 30.0  # how long a claim may take to be published and recorded
    retry_wait: float = 5.0  # after a broker or database error

    def __post_init__(self) -> None:
        if self.cap < 1:
            raise InvalidInput(f"the queue cap must be at least 1, got {self.cap}")


@dataclass(kw_only=True, slots=True)
class FeedStats:
    published: int = 0
    republished: int = 0
    lost: int = 0
    cycles: int = 0


class Feeder:
    """Feeds the queues of *tasks* (all of the app's *broker.executor* tasks by default)."""

    def __init__(
        self,
        app: App,
        broker: Broker,
        options: FeedOptions,
        *,
        url: str | None = None,
        tasks: Sequence[str] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.app = app
        self.broker = broker
        self.options = options
        self.url = url or app.db
        self.defs = _defs(app, broker.executor, tasks)
        self.queues: dict[str, list[TaskDef]] = {}
        for d in self.defs:
            self.queues.setdefault(d.queue or f"trawl.{d.name}", []).append(d)
        self.owner = f"feed:{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.stats = FeedStats()
        self._rng = rng or random.Random()
        self._wake = threading.Event()
        self._idle: set[str] = set()  # queues whose last look found nothing due
        self._stopping = False
        self._gates = {
            d.name: engine_claim.TaskGate(
                name=d.name,
                timeout=options.publish_lease,
                limits=tuple(app.limits_for(d)),
                depends_on=d.schedule.depends_on,
                weights=d.schedule.visit_weights,
            )
            for d in self.defs
        }

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def run(self, store: Store) -> int:
        """Feed until stopped (SIGINT/SIGTERM); returns the exit code."""
        self.prepare(store)
        listener = Listener(self.url, self._wake.set)
        listener.start()
        restore = _on_signals(self.stop)
        try:
            self._loop(store)
        finally:
            restore()
            listener.stop()
            self.release(store)
        log.info("feeder %s stopped: %s", self.owner, self.stats)
        return 0

    def prepare(self, store: Store) -> None:
        """Register the tasks and lease their queues (refused if another feeder has one)."""
        store.ensure_schema(auto=store.is_sqlite)
        store.register_tasks(d.info() for d in self.defs)
        limits = {lim.name: lim for g in self._gates.values() for lim in g.limits}
        store.register_limits([limits[name] for name in sorted(limits)])
        for queue in self.queues:
            self._take(store, queue)

    def _take(self, store: Store, queue: str) -> None:
        with store.write():
            now = store.clock()
            until = now + self._lease_span()
            holder = store.handoffs.take_queue(
                queue, self.broker.executor, self.owner, self.options.cap, until, now
            )
        if holder is not None:
            owner, held_until = holder
            raise FeederTaken(
                f"queue {queue} is fed by {owner} (its lease runs {held_until - now:.0f}s more):"
                " one feeder per queue keeps the cap; stop the other one first"
            )

    def release(self, store: Store) -> None:
        """Give the queues up (a feeder stopping): another feeder may take them at once."""
        with contextlib.suppress(DatabaseUnavailable), store.write():
            for queue in self.queues:
                store.handoffs.leave_queue(queue, self.owner, store.clock())

    def _lease_span(self) -> float:
        """A feeder's lease on its queue outlasts its longest wait, so a live feeder keeps it."""
        o = self.options
        return 2 * max(o.full_wait + o.splay, o.idle_wait, o.retry_wait) + 60.0

    # -- the loop -------------------------------------------------------------------------

    def _loop(self, store: Store) -> None:
        next_look = dict.fromkeys(self.queues, 0.0)
        last_said = time.monotonic()
        while not self._stopping:
            now = time.monotonic()
            for queue in [q for q, at in next_look.items() if at <= now]:
                next_look[queue] = now + self._cycle_safely(store, queue)
            wait = min(next_look.values()) - time.monotonic()
            if wait > 0 and self._wake.wait(wait):
                self._wake.clear()
                for queue in self._idle:  # work was added: look at once where none was due
                    next_look[queue] = 0.0
            if time.monotonic() - last_said >= SAY_EVERY:
                last_said = time.monotonic()
                log.info("feeder %s: %s", self.owner, self.stats)

    def _cycle_safely(self, store: Store, queue: str) -> float:
        try:
            return self.cycle(store, queue)
        except FeederTaken:
            raise
        except Exception as error:  # the broker or the database is away: try again later
            log.warning(
                "feeding %s failed, retrying in %.0fs: %s", queue, self.options.retry_wait, error
            )
            return self.options.retry_wait

    def cycle(self, store: Store, queue: str) -> float:
        """One look at *queue*: returns how long to wait before the next."""
        self.stats.cycles += 1
        defs = self.queues[queue]
        self._recover(store, queue, defs)
        length = self.broker.length(queue)
        outstanding = self._saw(store, queue, defs, length)
        # The broker's count leaves out the messages workers hold unacknowledged (prefetched,
        # or running: they are acknowledged once committed), which a worker that dies puts
        # back. Jobs published and not committed count them, so the cap holds then too.
        free = self.options.cap - max(length, outstanding)
        if free < MIN_FREE * self.options.cap:
            return self.options.full_wait + self._rng.uniform(0, self.options.splay)
        jobs = self._claim(store, defs, free)
        if not jobs:
            self._idle.add(queue)
            return self._until_due(store, defs)
        self._idle.discard(queue)
        self._publish(store, queue, jobs)
        return 0.0

    def _until_due(self, store: Store, defs: list[TaskDef]) -> float:
        """Nothing is due: wait until something will be (a retry, a revisit, a lease that
        lapses), at most --idle-wait."""
        with store.read():
            due = store.handoffs.next_due([d.name for d in defs])
            now = store.clock()
        if due is None:
            return self.options.idle_wait
        return max(0.05, min(self.options.idle_wait, due - now))

    def _recover(self, store: Store, queue: str, defs: list[TaskDef]) -> None:
        """Publish again what a feeder claimed and never recorded; settle lapsed leases."""
        names = [d.name for d in defs]
        with store.write():
            now = store.clock()
            again = store.handoffs.unpublished(
                names, self.owner, self.options.publish_lease, now, self.options.cap
            )
        if again:
            log.info("%s: publishing again %d jobs claimed but never recorded", queue, len(again))
            self._publish(store, queue, [(j.task, j.job_id, j.attempt) for j in again])
            self.stats.republished += len(again)
        lost, report = sweep_lapsed(store, {d.name: d for d in defs})
        settled = [r for r in lost if r.job_id in report.committed]
        if settled:
            log.warning(
                "%s: %d jobs lost with their worker (or waited in the broker past the"
                " queue lease): settled as crashed attempts, retried by their backoff",
                queue,
                len(settled),
            )
            self.stats.lost += len(settled)

    def _saw(self, store: Store, queue: str, defs: list[TaskDef], length: int) -> int:
        """Record the broker's length (renewing our lease on the queue); returns the jobs
        published and not yet committed."""
        with store.write():
            now = store.clock()
            until = now + self._lease_span()
            kept = store.handoffs.saw_queue(queue, self.owner, length, until, now)
            outstanding = store.handoffs.outstanding([d.name for d in defs])
        if not kept:
            self._take(store, queue)  # our lease lapsed (a long outage): take it back if free
        return outstanding

    def _claim(self, store: Store, defs: list[TaskDef], room: int) -> list[tuple[str, int, int]]:
        gates = [self._gates[d.name] for d in defs]
        with store.unit():
            batch = engine_claim.claim(store, gates, room, self.owner)
            store.handoffs.mark_claimed([j.job_id for j in batch.jobs])
        return [(j.task, j.job_id, j.attempt) for j in batch.jobs]

    def _publish(self, store: Store, queue: str, jobs: list[tuple[str, int, int]]) -> None:
        by_task: dict[str, list[tuple[int, int]]] = {}
        for task, job_id, attempt in jobs:
            by_task.setdefault(task, []).append((job_id, attempt))
        for task, pairs in by_task.items():
            self.broker.publish(queue, task, pairs)
            with store.write():
                until = store.clock() + self.options.queue_lease
                store.handoffs.record_queued(pairs, until)
            self.stats.published += len(pairs)


def _defs(app: App, executor: str, tasks: Sequence[str] | None) -> list[TaskDef]:
    mine = app.external(executor)
    if tasks is None:
        if not mine:
            raise InvalidInput(
                f"the app declares no task with executor={executor!r}: nothing to feed"
            )
        return mine
    chosen = app.select(tasks)
    for d in chosen:
        if d.executor != executor:
            raise InvalidInput(
                f"task {d.name!r} has executor={d.executor!r}, not {executor!r}: not fed here"
            )
    return chosen


def _on_signals(stop: Callable[[], None]) -> Callable[[], None]:
    """Stop on SIGINT/SIGTERM (main thread only); returns what puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in old:
        signal.signal(sig, lambda *_: stop())

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore
