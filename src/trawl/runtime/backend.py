"""Where a worker claims and commits: the database itself (:class:`LocalBackend`), or a
tracker server it reaches over a WebSocket (``trawl.runtime.remote``). One claim/commit
protocol, two ways to reach it: the worker's slots, timeouts, retries and stopping are the
same either way.

A backend raises :class:`~trawl.model.errors.DatabaseUnavailable` (or a subclass) when the
other side cannot be reached; the worker waits that out, and after a failed claim asks the
next one to take back the jobs the failed one may have leased (``known``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from trawl.engine import claim as engine_claim
from trawl.engine.commit import commit, commit_resilient, prepare
from trawl.model.errors import DataRejected
from trawl.model.records import AttemptResult, CommitReport
from trawl.runtime.app import TaskDef
from trawl.runtime.clock import WorkerClock
from trawl.runtime.context import Reader
from trawl.runtime.settle import sweep_lapsed
from trawl.runtime.store_thread import StoreThread
from trawl.store.notify import Listener
from trawl.store.store import SMALL_CACHE_MIB, Store, analyze_apart, vacuum_apart

log = logging.getLogger("trawl.worker")

ClaimFn = Callable[[Store, int], engine_claim.ClaimBatch]
# How a lane leases inside its commit's transaction: what it returns is read after the
# COMMIT, so a claim that needs no answer before then costs no round trip of its own.
LaterClaimFn = Callable[[Store, int], engine_claim.Claimed]
# Which of a batch's results may commit, read in the commit's own transaction.
Fence = Callable[[Store, list[AttemptResult]], list[AttemptResult]]


def read_at_once(claim: ClaimFn) -> LaterClaimFn:
    """A claim whose batch is known as soon as it returns, as a lane's claim."""

    def later(store: Store, limit: int) -> engine_claim.Claimed:
        batch = claim(store, limit)
        return lambda: batch

    return later


Lease = tuple[int, int, float]  # job id, attempt, seconds


class Lane(Protocol):
    """One claim/commit channel with a batch in flight at a time."""

    async def commit_and_claim(
        self, results: list[AttemptResult], limit: int, known: frozenset[int] | None
    ) -> tuple[CommitReport, engine_claim.ClaimBatch]:
        """Commit *results* and lease up to *limit* jobs, in one transaction where it can.
        With *known* (the jobs the worker holds), first take back the running jobs leased
        to this worker that it does not know: a claim whose answer was lost."""

    async def sweep(self, defs: Mapping[str, TaskDef]) -> tuple[list[AttemptResult], CommitReport]:
        """Settle lapsed leases of *defs*' tasks as lost attempts."""

    def now(self) -> float: ...


class Backend(Protocol):
    @property
    def owner(self) -> str:
        """Who the leases are held by (the worker's id)."""

    @property
    def reader(self) -> Reader:
        """What a task's Context reads through."""

    async def prepare(
        self, defs: Mapping[str, TaskDef], gates: Sequence[engine_claim.TaskGate]
    ) -> None:
        """Check the clock and schema, and register the tasks and their limits."""

    def lanes(self) -> list[Lane]:
        """The lanes to claim on (opened now)."""

    def capacity(self) -> int | None:
        """At most this many jobs at once, if the other side says so (a pipeline's slots)."""

    async def commit(self, results: list[AttemptResult]) -> CommitReport: ...

    async def renew(self, leases: Sequence[Lease]) -> set[int]:
        """Extend leases; the job ids still held."""

    async def recheck_clock(self) -> None: ...

    async def upkeep(self) -> None:
        """Housekeeping the worker does now and then beside its work: on a database, keep
        the planner's statistics up with the tables' growth (store/planner_stats.py) and
        vacuum the tables that churn (store/vacuum.py)."""

    def listen(self, wake: Callable[[], None]) -> None:
        """Call *wake* (from any thread) when new work may be due."""

    async def close(self) -> None: ...


def commit_and_claim(
    store: Store,
    results: list[AttemptResult],
    limit: int,
    known: frozenset[int] | None,
    claim: LaterClaimFn,
    tasks: Sequence[str],
    owner: str,
    fence: Fence | None = None,
) -> tuple[CommitReport, engine_claim.ClaimBatch]:
    """Commit *results* and lease up to *limit* jobs with *claim* in one transaction: one
    COMMIT (one WAL flush) per batch, not two. With *known*, first take back the running
    jobs of *tasks* leased to *owner* that are not in it. (A local lane and a tracker
    claiming for a remote pipeline both do this.) *fence* picks the results that may
    commit, in the same transaction (a tracker's: those whose lease the pipeline holds)."""
    if limit <= 0:
        return _commit_apart(store, results, fence), engine_claim.ClaimBatch(jobs=[])
    prepare(results)  # outside the transaction: an fdatasync must not hold the write lock
    try:
        with store.unit():
            mine = _picked(store, results, fence)
            report = commit(store, mine) if mine else CommitReport()
            claimed = _claim_adopting(store, limit, known, claim, tasks, owner)
    except DataRejected:  # one attempt holds a value the database refuses: find it
        report = _commit_apart(store, results, fence)
        return report, _claim_adopting(store, limit, known, claim, tasks, owner)()
    return report, claimed()


def _commit_apart(store: Store, results: list[AttemptResult], fence: Fence | None) -> CommitReport:
    """Commit *results* (those *fence* picks) without a claim, an attempt whose value the
    database refuses failing alone."""
    mine = _picked(store, results, fence)
    return commit_resilient(store, mine) if mine else CommitReport()


def _picked(store: Store, results: list[AttemptResult], fence: Fence | None) -> list[AttemptResult]:
    return results if fence is None or not results else fence(store, results)


def _claim_adopting(
    store: Store,
    limit: int,
    known: frozenset[int] | None,
    claim: LaterClaimFn,
    tasks: Sequence[str],
    owner: str,
) -> engine_claim.Claimed:
    if known is None:
        return claim(store, limit)
    with store.write():
        lost = [j for j in store.held_by(tasks, owner) if j.job_id not in known]
        if lost:
            log.warning("took back %d jobs leased by a claim whose answer was lost", len(lost))
        claimed = claim(store, limit - len(lost)) if limit > len(lost) else None

    def read() -> engine_claim.ClaimBatch:
        if claimed is None:
            return engine_claim.ClaimBatch(jobs=lost)
        batch = claimed()
        return engine_claim.ClaimBatch(jobs=lost + batch.jobs, wake_at=batch.wake_at)

    return read


class LocalLane:
    """A lane on a database connection of its own."""

    def __init__(self, thread: StoreThread, claim: LaterClaimFn, tasks: Sequence[str], owner: str):
        self.thread = thread
        self._claim, self._tasks, self._owner = claim, list(tasks), owner

    async def commit_and_claim(
        self, results: list[AttemptResult], limit: int, known: frozenset[int] | None
    ) -> tuple[CommitReport, engine_claim.ClaimBatch]:
        return await self.thread.call(self.commit_and_claim_now, results, limit, known)

    def commit_and_claim_now(
        self, results: list[AttemptResult], limit: int, known: frozenset[int] | None
    ) -> tuple[CommitReport, engine_claim.ClaimBatch]:
        return commit_and_claim(
            self.thread.store, results, limit, known, self._claim, self._tasks, self._owner
        )

    async def sweep(self, defs: Mapping[str, TaskDef]) -> tuple[list[AttemptResult], CommitReport]:
        return await self.thread.call(sweep_lapsed, self.thread.store, defs)

    def now(self) -> float:
        return self.thread.store.clock()


class LocalBackend:
    """The database at *url*: the worker's own connection (lane 0, commits, Context reads),
    one more per extra lane, and one for lease renewals, so a long commit or claim cannot
    make leases lapse."""

    def __init__(
        self,
        url: str,
        *,
        owner: str,
        clock: WorkerClock,
        claim: LaterClaimFn,
        tasks: Sequence[str],
        connections: int = 1,
        on_store: Callable[[Store], None] = lambda store: None,
    ) -> None:
        self.url, self.owner, self.clock = url, owner, clock
        self._claim, self._tasks, self._connections = claim, list(tasks), connections
        self._on_store = on_store
        # A lane's statements each write a batch: their statement journals stay in memory
        # (connection.TEMP_IN_MEMORY; prepare's task registration asks for files).
        self.thread = StoreThread(Store(url, clock=clock.now, temp_in_memory=True))
        # On PostgreSQL a task's own short transactions (the crawler's politeness gate) get
        # a connection of their own: behind lane 0 they would wait for every commit's WAL
        # flush. SQLite has one writer whichever connection asks, so they share lane 0's.
        self._reads = (
            None
            if self.thread.store.is_sqlite
            else StoreThread(Store(url, clock=clock.now), name="trawl-db-reads")
        )
        self.reader: Reader = self._reads or self.thread
        self._renewer = StoreThread(
            Store(url, clock=clock.now, cache_mib=SMALL_CACHE_MIB), name="trawl-db-leases"
        )
        self._extra: list[StoreThread] = []
        self._listener: Listener | None = None

    async def prepare(
        self, defs: Mapping[str, TaskDef], gates: Sequence[engine_claim.TaskGate]
    ) -> None:
        limits = sorted({lim for g in gates for lim in g.limits}, key=lambda lim: lim.name)

        def prepare(store: Store) -> dict[str, int]:
            self.clock.check(store)
            store.ensure_schema(auto=store.is_sqlite)
            requeued = store.register_tasks(d.info() for d in defs.values())
            store.register_limits(limits)
            return requeued

        requeued = await self.thread.call(prepare, self.thread.store)
        for task, count in requeued.items():
            log.info("task %s has a new version: %d results are due again", task, count)
        self._on_store(self.thread.store)
        if self._reads is not None:
            self._on_store(self._reads.store)

    def lanes(self) -> list[Lane]:
        self._extra = [
            StoreThread(
                Store(self.url, clock=self.clock.now, temp_in_memory=True),
                name=f"trawl-db-lane{n}",
            )
            for n in range(1, self._connections)
        ]
        for thread in self._extra:
            self._on_store(thread.store)
        threads = [self.thread, *self._extra]
        return [LocalLane(t, self._claim, self._tasks, self.owner) for t in threads]

    def capacity(self) -> int | None:
        return None

    async def commit(self, results: list[AttemptResult]) -> CommitReport:
        return await self.thread.call(commit_resilient, self.thread.store, results)

    async def renew(self, leases: Sequence[Lease]) -> set[int]:
        return await self._renewer.call(self._renewer.store.renew, leases)

    async def recheck_clock(self) -> None:
        await self.thread.call(self.clock.recheck, self.thread.store)

    async def upkeep(self) -> None:
        # The looks are quick reads on the lease connection, idle between renewals. An
        # ANALYZE can take seconds on big tables (a VACUUM of a big crawl's host table, a
        # while): each gets a connection of its own, so no renewal (a lease could lapse)
        # and no commit or claim waits for it.
        stale = await self._renewer.call(self._renewer.store.stale_statistics)
        if stale:
            await asyncio.to_thread(analyze_apart, self.url, stale)
        crowded = await self._renewer.call(self._renewer.store.crowded_tables)
        if crowded:
            await asyncio.to_thread(vacuum_apart, self.url, crowded)

    def listen(self, wake: Callable[[], None]) -> None:
        self._listener = Listener(self.url, wake)
        self._listener.start()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        reads = [self._reads] if self._reads is not None else []
        for thread in [*self._extra, *reads, self._renewer, self.thread]:
            await asyncio.to_thread(thread.close)
