"""A worker process: claims due jobs in batches, runs them in N async slots, commits in
batches, keeps its leases alive, and stops cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trawl.engine import claim as engine_claim
from trawl.model.errors import DatabaseUnavailable
from trawl.model.records import AttemptResult, ClaimedJob, CommitReport
from trawl.model.states import Outcome
from trawl.runtime import loop as process_loop
from trawl.runtime.actor.handle import EXIT_REPLACE
from trawl.runtime.actor.hooks import ActorHooks
from trawl.runtime.actor.spec import ActorInfo
from trawl.runtime.app import App, TaskDef
from trawl.runtime.attempt import TaskTimeout, abandoned, released, run_attempt, stuck_threads
from trawl.runtime.backend import Backend, Lane, LocalBackend, read_at_once
from trawl.runtime.clock import CHECK_EVERY, WorkerClock
from trawl.runtime.context import Context
from trawl.runtime.outcome import due_again_in
from trawl.runtime.plugins import for_app
from trawl.runtime.stats import WorkerStats
from trawl.store import planner_stats
from trawl.store.store import Store

log = logging.getLogger("trawl.worker")
T = TypeVar("T")

RETRY_MAX = 30.0  # longest wait between attempts to reach a database that went away
SWEEP_EVERY = 1.0  # seconds between looks for lapsed leases (crashed attempts)
UPKEEP_EVERY = planner_stats.EVERY  # seconds between the backend's housekeeping
# ... except in the first UPKEEP_EARLY seconds, when it looks every UPKEEP_FIRST: a new
# crawl's statements are prepared in its first second, before anything analyzed its tables,
# and keep those plans until an ANALYZE (store/planner_stats.py). The server's activity
# counters, which say a table grew, lag by up to a second, so frequent looks are what find
# it soonest: in a 20,000-page crawl on PostgreSQL the first ANALYZE came 1.7 s after the
# command started instead of 3.6 s, and the commits' new-jobs inserts still planned blind
# (a scan of every tag) ran 42 times instead of 235.
UPKEEP_FIRST = 0.25
UPKEEP_EARLY = 3.0
# While too few slots are free to claim, finished attempts wait up to this long for others
# to commit with: a batch costs one transaction, however many attempts it holds.
GATHER = 0.02
# A lane claims again once this part of its slots is free (so claims come in batches).
CLAIM_WHEN_FREE = 0.25
# Deferrals this worker committed that come due within NEAR seconds are claimed when they
# do, not at the next poll (at most DUE_KEPT of them are remembered; later ones, and any
# beyond, are found by the poll).
NEAR = 60.0
DUE_KEPT = 10_000
# An attempt cancelled (past its timeout, or at shutdown) has this long to end before the
# worker stops waiting for it: a task that catches CancelledError and goes on would hold
# its slot and its renewed lease for ever (its job never finishing, its crawl never done).
CANCEL_GRACE = 2.0


@dataclass(slots=True, eq=False)
class _Running:
    """An attempt this worker runs; *abandoned* once the worker stopped waiting for it."""

    job: ClaimedJob
    ctx: Context
    d: TaskDef
    started: float  # monotonic
    task: asyncio.Task[None] = field(init=False)
    began: bool = False  # its task ran (a task cancelled before it began never does)
    give_up_at: float | None = None  # cancelled: when the worker stops waiting (monotonic)
    abandoned: bool = False


def upkeep_pause(elapsed: float, last: float) -> float:
    """Seconds to wait before the next upkeep, *elapsed* seconds after the worker started,
    having last waited *last*: often at first (a new crawl's tables grow fastest in its first
    seconds), then twice as long each time up to :data:`UPKEEP_EVERY`."""
    if elapsed < UPKEEP_EARLY:
        return min(UPKEEP_FIRST, UPKEEP_EVERY)
    return min(max(2 * last, UPKEEP_FIRST), UPKEEP_EVERY)


class Worker:
    """Runs an app's tasks against its database until stopped (or idle, if asked)."""

    def __init__(
        self,
        app: App,
        *,
        url: str | None = None,
        concurrency: int = 16,
        tasks: Iterable[str] | None = None,
        exit_when_idle: bool = False,
        grace: float = 30.0,
        poll: float = 1.0,
        owner: str | None = None,
        on_progress: Callable[[WorkerStats], None] | None = None,
        hooks: ActorHooks | None = None,
        claim: Callable[[Store, int], engine_claim.ClaimBatch] | None = None,
        linger: float = 0.0,
        connections: int = 1,
        clock: WorkerClock | None = None,
        backend: Backend | None = None,
        on_stop: Callable[[], Awaitable[None]] | None = None,
        claim_when_free: float = CLAIM_WHEN_FREE,
    ) -> None:
        """``hooks``: the plugin hooks to fire (default: the app's plugins, as a worker).
        ``claim``: how to lease a batch (an actor's keyed claim). ``linger``: with
        ``exit_when_idle``, how long the queue must stay empty before the worker exits.
        ``connections``: claim/commit lanes, each a database connection of its own with a
        batch of at most its share of the slots in flight. ``clock``: the worker's time and
        how far from the database's it may be (runtime/clock.py). ``backend``: where to
        claim and commit (default: the database at *url*; a remote pipeline's is a
        tracker server, runtime/remote.py). ``on_stop``: awaited on the worker's loop once
        nothing runs any more, to close what its tasks opened (a crawl's HTTP connections
        and WARC files). ``claim_when_free``: the part of a lane's slots that must be free
        before it claims again (finished attempts commit with the claim): a larger part
        makes fewer, larger transactions and leaves more slots idle meanwhile."""
        if not 0 < claim_when_free <= 1:
            raise ValueError(f"claim_when_free must be in (0, 1], got {claim_when_free}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if connections < 1:
            raise ValueError(f"connections must be at least 1, got {connections}")
        self.app = app
        self.url = url or app.db
        # Tasks an external executor (Celery) runs are never run here (asking for one fails).
        self.defs = {d.name: d for d in app.local(list(tasks) if tasks is not None else None)}
        self.concurrency = concurrency
        self.exit_when_idle = exit_when_idle
        self.grace = grace
        self.poll = poll
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.stats = WorkerStats()
        self._on_progress = on_progress
        self._on_stop = on_stop
        self._leases = {name: d.timeout for name, d in self.defs.items()}
        self._gates = [
            engine_claim.TaskGate(
                name=d.name,
                timeout=d.timeout,
                limits=tuple(app.limits_for(d)),
                depends_on=d.schedule.depends_on,
                weights=d.schedule.visit_weights,
            )
            for d in self.defs.values()
        ]
        self._running: dict[int, _Running] = {}
        # When each running async attempt times out (monotonic); the watchdog enforces it.
        self._deadlines: dict[int, float] = {}
        self._pending: list[AttemptResult] = []
        self._pending_since = 0.0  # when the oldest of _pending finished (monotonic)
        self._committing: list[AttemptResult] = []
        self._commits = 0
        # monotonic: when the last retry or deferral this worker committed comes due
        self._later_until = 0.0
        # When the deferrals this worker committed come due, soonest first, on the lanes'
        # clock (a deferral's time is the database's or the tracker's, as lane.now()).
        # An empty claim's reply says when other work comes due only for gated tasks: a
        # crawl page put aside for its host's turn came back at the next poll, up to a
        # second late, and its turn, a start reserved for it, went unused.
        self._due: list[float] = []
        self._stopping = False
        self._stopped_at = 0.0  # monotonic time of stop()
        self._signals = 0
        self.hooks = hooks or ActorHooks(
            for_app(app),
            ActorInfo(
                type="worker", key=None, pid=os.getpid(), owner=self.owner, tasks=tuple(self.defs)
            ),
        )
        self.linger = linger
        self.connections = connections
        self.claim_when_free = claim_when_free
        self._reserved = 0  # slots promised to claims in flight on any lane
        self._calls = 0  # lane calls (commit and/or claim) in flight
        self._next_sweep = 0.0
        self.clock = clock or WorkerClock()
        self._wake = asyncio.Event()  # something to claim, commit or stop for
        # Async attempts abandoned while still running (they caught their cancellation):
        # each goes on unseen, as does a plain def task's thread past its timeout, so as
        # many of both as there are slots stop the worker (_shed_if_overloaded).
        self._abandoned: set[asyncio.Task[None]] = set()
        self._shed = False
        # Set while the last claim found nothing due and nothing runs or waits here: the
        # work may be over (a crawl's watcher then counts its pages at once).
        self.dry = asyncio.Event()
        self._commit_wanted = asyncio.Event()
        self.backend: Backend = backend or LocalBackend(
            self.url,
            owner=self.owner,
            clock=self.clock,
            claim=read_at_once(claim) if claim is not None else self._claim_gated,
            tasks=list(self.defs),
            connections=connections,
            on_store=self.hooks.tap,
        )

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; running attempts get the grace period to finish."""
        if not self._stopping:
            self._stopped_at = time.monotonic()
        self._stopping = True
        self._wake.set()

    async def run(self) -> int:
        """Run until stopped; returns the process exit code."""
        loop = asyncio.get_running_loop()
        try:
            await self.backend.prepare(self.defs, self._gates)
            self.hooks.startup()
            self.backend.listen(lambda: self._wake_from_thread(loop))
            self._install_signals(loop)
            try:
                await self._serve(self.backend.lanes())
            finally:
                self._remove_signals(loop)
                self.hooks.shutdown()
        finally:
            try:
                if self._on_stop is not None:
                    await self._on_stop()
            finally:
                await self.backend.close()
        log.info("worker %s stopped: %s", self.owner, self.stats.line())
        return EXIT_REPLACE if self._shed else 0

    async def _serve(self, lanes: list[Lane]) -> None:
        helpers = [
            asyncio.create_task(self._heartbeat_loop()),
            asyncio.create_task(self._watchdog_loop()),
            asyncio.create_task(self._progress_loop()),
            asyncio.create_task(self._clock_loop()),
            asyncio.create_task(self._upkeep_loop()),
        ]
        try:
            await self._claim_lanes(lanes)
            # From here on nothing is claimed: finished attempts are committed as they come.
            helpers.append(asyncio.create_task(self._commit_loop()))
            await self._drain()
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    def _wake_from_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        # The listener thread can outlive run() by a moment; a closed loop has no one to wake.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._wake.set)

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _remove_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second %s: exiting now; unfinished leases will expire", sig.name)
            os._exit(128 + sig.value)
        log.info(
            "%s: finishing %d running tasks (up to %.0fs); press again to exit at once",
            sig.name,
            len(self._running),
            self.grace,
        )
        self.stop()

    # -- claiming -------------------------------------------------------------------------

    def _claim_gated(self, store: Store, limit: int) -> engine_claim.Claimed:
        return engine_claim.claim_later(store, self._gates, limit, self.owner)

    async def _claim_lanes(self, lanes: list[Lane]) -> None:
        """Run a claim loop per lane until all have stopped. A lane that fails stops the
        others, so the worker drains and exits instead of running on with fewer lanes."""
        loops = [asyncio.create_task(self._claim_loop(lane)) for lane in lanes]
        try:
            done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)

    async def _claim_loop(self, lane: Lane) -> None:
        """Until stopped: commit what finished and claim into the free slots, together.

        Claims wait until ``claim_when_free`` (a quarter, unless set) of a lane's share of
        the slots is free, so they come in batches; while too few are free, finished
        attempts are committed on their own. With several lanes each batch is at most its
        share, so one lane's batch runs while another's commit and claim are at the
        database (slots a claim in flight will fill are reserved, so the lanes never lease
        more than the free slots)."""
        idle_delay = 0.01
        idle_since: float | None = None
        while not self._stopping:
            slots = min(self.concurrency, self.backend.capacity() or self.concurrency)
            share = -(-slots // self.connections)
            low_water = max(1, int(share * self.claim_when_free))
            free = slots - len(self._running) - self._reserved
            claiming = free >= low_water or not (self._running or self._reserved)
            if not claiming and not self._pending:
                await self._wait(self.poll)  # let slots free up so claims come in batches
                continue
            if not claiming and len(self._pending) < low_water and not self._stopping:
                waited = time.monotonic() - self._pending_since
                if waited < GATHER:  # more attempts will finish: commit them together
                    await self._wait(GATHER - waited)
                    continue
            if claiming and time.monotonic() >= self._next_sweep:
                await self._sweep(lane)
                continue  # other lanes claimed meanwhile: count the free slots again
            epoch = self._commits
            asked = lane.now()
            results = self._take_pending()
            limit = min(free, share) if claiming else 0
            self._reserved += limit
            self._calls += 1
            try:
                report, batch = await self._lane_call(lane, results, limit)
            finally:
                self._reserved -= limit
                self._calls -= 1
            if results:
                self._committed(results, report)
            if not claiming:
                continue
            for job in batch.jobs:
                self._start(job)
            if batch.jobs:
                self.dry.clear()
                idle_delay, idle_since = 0.01, None
                continue
            idle = (
                self._idle(epoch)
                and batch.wake_at is None
                and time.monotonic() >= self._later_until
            )
            (self.dry.set if idle else self.dry.clear)()
            if self.exit_when_idle and idle:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= self.linger:
                    return
            await self._wait(_until(self._wake_at(batch.wake_at, asked), lane.now(), idle_delay))
            idle_delay = min(self.poll, idle_delay * 2)

    async def _lane_call(
        self, lane: Lane, results: list[AttemptResult], limit: int
    ) -> tuple[CommitReport, engine_claim.ClaimBatch]:
        """Commit and claim on *db*, waiting out outages. A call that failed may still have
        committed (the connection died before its answer came back), so every call after a
        failure first takes back the jobs it leased. Once stopping it claims nothing more,
        and past the grace period it gives up on what it could not commit."""
        delay = 0.5
        known: frozenset[int] | None = None
        while True:
            try:
                return await lane.commit_and_claim(results, limit, known)
            except DatabaseUnavailable as error:
                if self._past_grace():
                    self._give_up(results, error)
                    return CommitReport(), engine_claim.ClaimBatch(jobs=[])
                log.warning("claim failed, retrying in %.1fs: %s", delay, error)
                await asyncio.sleep(delay)
                delay = min(RETRY_MAX, delay * 2)
                known = self._held()
                if self._stopping:
                    limit = 0
                    if not results:
                        return CommitReport(), engine_claim.ClaimBatch(jobs=[])

    def _past_grace(self) -> bool:
        return self._stopping and time.monotonic() - self._stopped_at > self.grace

    def _give_up(self, results: list[AttemptResult], error: Exception) -> None:
        if results:
            log.error(
                "stopping: gave up committing %d finished attempts after the grace period "
                "(%s); their jobs run again once their leases lapse",
                len(results),
                error,
            )

    def _held(self) -> frozenset[int]:
        """The jobs this worker holds: running, or finished and waiting for their commit."""
        held = {r.job_id for r in self._pending + self._committing}
        return frozenset(held | self._running.keys())

    def _idle(self, epoch: int) -> bool:
        # Nothing ran here and nothing committed since the empty claim began: nothing is due.
        busy = self._running or self._pending or self._committing or self._calls
        return not busy and epoch == self._commits

    async def _wait(self, seconds: float) -> None:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that
        # lands as the wake fires, so a claim loop told to stop (another lane failed) ran
        # on and the worker never exited (test_a_lane_that_fails_stops_the_worker..., one
        # run in 20 with both cores busy; tests/unit/test_worker_wait.py).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        self._wake.clear()

    def _start(self, job: ClaimedJob) -> None:
        if job.job_id in self._running:  # taken back by one lane while another claimed it
            return
        self.stats.claimed += 1
        ctx = Context(
            id=job.item_id,
            data=job.data,
            tags=job.tags,
            attempt=job.attempt,
            task=job.task,
            reader=self.backend.reader,
            loop=asyncio.get_running_loop(),
        )
        running = _Running(job, ctx, self.defs[job.task], time.monotonic())
        running.task = asyncio.create_task(self._run_job(running))
        self._running[job.job_id] = running
        self.stats.running = len(self._running)
        if self.hooks.claims:
            self.hooks.claimed(job)

    # -- running --------------------------------------------------------------------------

    async def _run_job(self, running: _Running) -> None:
        d, job, ctx = running.d, running.job, running.ctx
        if self.hooks.ticks:
            self.hooks.tick_start(job)
        running.began = True
        try:
            result = await run_attempt(d, job, ctx, self.hooks, self._deadlines)
        except asyncio.CancelledError:
            result = released(d, job, ctx)
        finally:
            if not running.abandoned:
                self._forget(running)
        if not d.is_async and _timed_out(result):  # its thread runs on
            self._shed_if_overloaded()
        if not running.abandoned:  # else its result went in when it was abandoned
            self._finished(running, result)

    def _forget(self, running: _Running) -> None:
        self._running.pop(running.job.job_id, None)
        self._deadlines.pop(running.job.job_id, None)
        self.stats.running = len(self._running)

    def _abandon(self, running: _Running, result: AttemptResult) -> None:
        """Stop waiting for a cancelled attempt that goes on: its slot is free and *result*
        is committed for it; whatever it does later is dropped."""
        running.abandoned = True
        self._forget(running)
        if running.began:
            log.warning(
                "task %s on %s did not stop within %gs of being cancelled: abandoned (%s)",
                running.job.task,
                running.job.item_id,
                CANCEL_GRACE,
                result.outcome,
            )
            if not running.task.done():
                # named so that, left behind at exit (loop.py), the warning says which
                running.task.set_name(
                    f"{running.job.task} on {running.job.item_id} (attempt {running.job.attempt})"
                )
                self._abandoned.add(running.task)
                running.task.add_done_callback(self._abandoned.discard)
                self._shed_if_overloaded()
        self._finished(running, result)

    def _shed_if_overloaded(self) -> None:
        if self._shed or self._stopping:  # a stopping worker exits anyway
            return
        left = len(self._abandoned) + stuck_threads()
        if left < self.concurrency:
            return
        self._shed = True
        log.error(
            "%d abandoned attempts are still running (async tasks that caught their"
            " cancellation, plain def tasks past their timeout), as many as this worker has"
            " slots, and only the process's end stops them: the worker stops and exits with"
            " status %d to be started afresh",
            left,
            EXIT_REPLACE,
        )
        self.stop()

    def _finished(self, running: _Running, result: AttemptResult) -> None:
        if self.hooks.ticks and running.began:
            self.hooks.tick_end(running.job, result)
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append(result)
        self._commit_wanted.set()
        self._wake.set()

    # -- committing -----------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        while True:
            await self._commit_wanted.wait()
            self._commit_wanted.clear()
            await self._flush()

    async def _flush(self) -> None:
        while self._pending:
            results = self._take_pending()
            try:
                report = await self._retrying("commit", self.backend.commit, results)
            except DatabaseUnavailable as error:  # stopping, and past the grace period
                self._give_up(results, error)
                report = CommitReport()
            self._committed(results, report)

    def _take_pending(self) -> list[AttemptResult]:
        """Hand the finished attempts to a commit (their leases are still renewed)."""
        results, self._pending = self._pending, []
        self._committing.extend(results)
        return results

    def _committed(self, results: list[AttemptResult], report: CommitReport) -> None:
        self._account(results, report)
        self._note_later(results, report)
        self.hooks.committed(results, report)
        handed = {id(r) for r in results}
        self._committing = [r for r in self._committing if id(r) not in handed]
        self._commits += 1
        self._wake.set()

    def _account(self, results: list[AttemptResult], report: CommitReport) -> None:
        outcomes = {r.job_id: r for r in results}
        for job_id in report.committed:
            outcome = outcomes[job_id].outcome
            if job_id in report.effect_failures or outcome is Outcome.FAILURE:
                self.stats.failed += 1
            elif outcome is Outcome.SUCCESS:
                self.stats.done += 1
            else:
                self.stats.released += 1
        for job_id in report.stale:
            stale = outcomes[job_id]
            self.stats.stale += 1
            log.warning(
                "stale commit rejected: %s on %s attempt %d lost its lease; the newer "
                "attempt's result stands",
                stale.task,
                stale.item_id,
                stale.attempt,
            )
        for job_id, message in report.effect_failures.items():
            log.warning(
                "effects of %s on %s failed: %s",
                outcomes[job_id].task,
                outcomes[job_id].item_id,
                message,
            )

    async def _heartbeat_loop(self) -> None:
        interval = max(0.2, min(10.0, min(self._leases.values(), default=30.0) / 3))
        while True:
            await asyncio.sleep(interval)
            held = [
                (r.job.job_id, r.job.attempt, self._leases[r.job.task])
                for r in self._running.values()
            ] + [
                (r.job_id, r.attempt, self._leases[r.task])
                for r in self._pending + self._committing
            ]
            if not held:
                continue
            try:
                kept = await self.backend.renew(held)
            except DatabaseUnavailable as error:
                log.warning("lease renewal failed: %s", error)
                continue
            for job_id, attempt, _ in held:
                # A finished attempt may have committed while the renewal waited its turn;
                # its commit says itself whether the lease was lost.
                running = self._running.get(job_id)
                if job_id not in kept and running is not None:
                    log.warning("lease lost on job %d attempt %d", job_id, attempt)
                    self.hooks.lease_lost(running.job)

    async def _watchdog_loop(self) -> None:
        """Cancel async attempts that ran past their task's timeout; ``_attempt`` records
        the cancellation as a TaskTimeout failure. Checked every twentieth of the shortest
        timeout (50 ms to 1 s), so an attempt is stopped at most that late. One that is
        still running :data:`CANCEL_GRACE` later is abandoned with that failure."""
        tick = max(0.05, min(1.0, min(self._leases.values(), default=20.0) / 20))
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            late = [job_id for job_id, deadline in self._deadlines.items() if deadline <= now]
            for job_id in late:
                del self._deadlines[job_id]
                running = self._running.get(job_id)
                if running is not None:
                    running.task.cancel()
                    running.give_up_at = now + CANCEL_GRACE
            stuck = [
                r
                for r in self._running.values()
                if r.give_up_at is not None and r.give_up_at <= now
            ]
            for r in stuck:  # an attempt that ended meanwhile has left _running
                self._abandon(r, abandoned(r.d, r.job, r.ctx, self.hooks, r.started))

    async def _upkeep_loop(self) -> None:
        started = time.monotonic()
        pause = 0.0
        while True:
            pause = upkeep_pause(time.monotonic() - started, pause)
            await asyncio.sleep(pause)
            try:
                await self.backend.upkeep()
            except DatabaseUnavailable as error:  # the work loops wait that out and say so
                log.debug("upkeep skipped: %s", error)
            except Exception:  # housekeeping must never stop the work: said, tried again later
                log.warning("upkeep failed (tried again in %gs)", UPKEEP_EVERY, exc_info=True)

    async def _progress_loop(self) -> None:
        if self._on_progress is None:
            return
        while True:
            self._on_progress(self.stats)
            await asyncio.sleep(0.5)

    # -- stopping -------------------------------------------------------------------------

    async def _drain(self) -> None:
        tasks = [r.task for r in self._running.values()]
        if tasks and self._stopping:
            await asyncio.wait(tasks, timeout=self.grace)
        elif tasks:
            await asyncio.wait(tasks)
        leftover = list(self._running.values())
        for running in leftover:
            running.task.cancel()  # their leases are released: due again at once
        if leftover:
            await asyncio.wait([r.task for r in leftover], timeout=CANCEL_GRACE)
        for running in leftover:
            # Still here: it went on after the cancel, or was cancelled before it began.
            if self._running.get(running.job.job_id) is running:
                self._abandon(running, released(running.d, running.job, running.ctx))
        self._commit_wanted.set()
        while self._pending or self._committing:  # noqa: ASYNC110 - two lists, no single event
            await asyncio.sleep(0.01)  # the commit loop retries through outages
        if self._on_progress is not None:
            self._on_progress(self.stats)

    async def _sweep(self, lane: Lane) -> None:
        """Settle lapsed leases of this worker's tasks as lost attempts before claiming."""
        self._next_sweep = time.monotonic() + SWEEP_EVERY  # no other lane sweeps meanwhile
        try:
            lost, report = await self._retrying(
                "sweep", lane.sweep, self.defs, wanted_at_stop=False
            )
        except DatabaseUnavailable:  # stopping: others will sweep
            return
        finally:  # counted from its end: a sweep slower than that still leaves time to claim
            self._next_sweep = time.monotonic() + SWEEP_EVERY
        for result in (r for r in lost if r.job_id in report.committed):
            log.warning("job %s of %s: %s", result.item_id, result.task, _why(result))
        if lost:
            self._note_later(lost, report)
            self.hooks.committed(lost, report)

    def _note_later(self, results: list[AttemptResult], report: CommitReport) -> None:
        ahead = due_again_in(results, report)
        if ahead:
            self._later_until = max(self._later_until, time.monotonic() + ahead)
            committed = set(report.committed)
            near = time.time() + NEAR
            for r in results:
                until = r.defer_until
                if (
                    r.outcome is Outcome.DEFERRED
                    and until is not None
                    and until < near
                    and r.job_id in committed
                    and len(self._due) < DUE_KEPT
                ):
                    heapq.heappush(self._due, until)

    def _wake_at(self, wake_at: float | None, asked: float) -> float | None:
        """The sooner of *wake_at* (the claim's) and the next deferral of this worker's to
        come due after *asked*, when the claim was made (those due by then it saw)."""
        due = self._due
        while due and due[0] <= asked:
            heapq.heappop(due)
        if not due:
            return wake_at
        return due[0] if wake_at is None else min(wake_at, due[0])

    async def _clock_loop(self) -> None:
        while True:
            await asyncio.sleep(CHECK_EVERY)
            try:
                await self._retrying(
                    "clock check", self.backend.recheck_clock, wanted_at_stop=False
                )
            except DatabaseUnavailable:  # stopping
                return

    async def _retrying(
        self,
        what: str,
        call: Callable[..., Awaitable[T]],
        *args: Any,
        wanted_at_stop: bool = True,
    ) -> T:
        """Await a backend call, waiting out outages with growing pauses; once stopping,
        only until the grace period is over, or not at all for a call that is not
        *wanted_at_stop* (raising the last DatabaseUnavailable)."""
        delay = 0.5
        while True:
            try:
                return await call(*args)
            except DatabaseUnavailable as error:
                if self._past_grace() or (self._stopping and not wanted_at_stop):
                    raise
                log.warning("%s failed, retrying in %.1fs: %s", what, delay, error)
                await asyncio.sleep(delay)
                delay = min(RETRY_MAX, delay * 2)


def _until(wake_at: float | None, now: float, idle: float) -> float:
    """How long to wait after an empty claim: until a deferred job is due, if sooner."""
    return idle if wake_at is None else max(0.0, min(idle, wake_at - now))


def run_worker(worker: Worker) -> int:
    """Run *worker* on a fresh event loop (the CLI's entry point); a task it abandoned does
    not keep the process alive after it stopped."""
    return process_loop.run(worker.run())


def _timed_out(result: AttemptResult) -> bool:
    return result.failure is not None and result.failure.error_type == TaskTimeout.__name__


def _why(result: AttemptResult) -> str:
    return result.failure.message if result.failure is not None else result.outcome
