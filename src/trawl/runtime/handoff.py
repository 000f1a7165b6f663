"""Running a job an external executor's worker received (a Celery task message).

The message names the job and its attempt. The worker takes the job with a
compare-and-swap on that attempt (so a message delivered twice, or one that outlived its
attempt, runs nothing), runs the task with the same ``Context`` as trawl's own workers,
keeps the lease alive while it runs, and commits through trawl, fenced by the attempt, like
any worker. A worker killed mid-run simply stops renewing: its lease lapses, and the feeder
settles it as a crashed attempt, to be retried.

Commits go straight to the database (the app's ``db``, or ``TRAWL_DB``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time

from trawl.engine.commit import commit_resilient
from trawl.model.errors import DatabaseUnavailable
from trawl.model.records import AttemptResult, ClaimedJob, CommitReport
from trawl.runtime import loop as process_loop
from trawl.runtime.actor.hooks import ActorHooks
from trawl.runtime.actor.spec import ActorInfo
from trawl.runtime.app import App, TaskDef
from trawl.runtime.attempt import run_attempt
from trawl.runtime.context import Context
from trawl.runtime.plugins import for_app
from trawl.runtime.store_thread import StoreThread
from trawl.store.store import Store

log = logging.getLogger("trawl.handoff")

STALE = "stale"  # what run() returns for a message whose attempt is over or already taken
RETRY_MAX = 5.0  # longest pause between tries of a commit the database refused for now


class HandoffRunner:
    """Runs handed-off attempts of *app* in this process, one at a time per call.

    The database connection is opened on first use in each process: a prefork pool forks
    its children after the app is imported, and a connection must not cross a fork."""

    def __init__(self, app: App, executor: str, *, url: str | None = None) -> None:
        self.app = app
        self.executor = executor
        self.url = url or app.db
        self._db: StoreThread | None = None
        self._pid = 0

    @property
    def owner(self) -> str:
        """The lease owner written on the jobs this process runs."""
        return f"{self.executor}:{socket.gethostname()}:{os.getpid()}"

    def run(self, task: str, job_id: int, attempt: int) -> str:
        """Run attempt *attempt* of job *job_id*; returns how it ended ("success",
        "failure", ...), or ``"stale"`` if the attempt was over or already taken."""
        return process_loop.run(self._run(self.app.get(task), job_id, attempt))

    def close(self) -> None:
        if self._db is not None and self._pid == os.getpid():
            self._db.close()
        self._db = None

    def _thread(self) -> StoreThread:
        if self._db is None or self._pid != os.getpid():
            self._db = StoreThread(Store(self.url), name="trawl-db-handoff")
            self._pid = os.getpid()
        return self._db

    async def _run(self, d: TaskDef, job_id: int, attempt: int) -> str:
        db = self._thread()
        job = await db.call(_start, db.store, d, job_id, attempt, self.owner)
        if job is None:
            log.info("job %d attempt %d: over or already taken; message dropped", job_id, attempt)
            return STALE
        hooks = self._hooks(d)
        if hooks.ticks:
            hooks.tick_start(job)
        result = await self._attempt(db, d, job, hooks)
        if hooks.ticks:
            hooks.tick_end(job, result)
        report = await _commit(db, result, d.timeout)
        hooks.committed([result], report)
        if job_id in report.stale:
            log.warning("job %d attempt %d lost its lease: result discarded", job_id, attempt)
            return STALE
        return str(result.outcome)

    async def _attempt(
        self, db: StoreThread, d: TaskDef, job: ClaimedJob, hooks: ActorHooks
    ) -> AttemptResult:
        ctx = Context(
            id=job.item_id,
            data=job.data,
            tags=job.tags,
            attempt=job.attempt,
            task=job.task,
            reader=db,
            loop=asyncio.get_running_loop(),
        )
        deadlines: dict[int, float] = {}
        running = asyncio.create_task(run_attempt(d, job, ctx, hooks, deadlines))
        keeper = asyncio.create_task(_keep(db, d, job, running, deadlines))
        try:
            return await running
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    def _hooks(self, d: TaskDef) -> ActorHooks:
        info = ActorInfo(
            type=self.executor, key=None, pid=os.getpid(), owner=self.owner, tasks=(d.name,)
        )
        return ActorHooks(for_app(self.app), info)


def _start(store: Store, d: TaskDef, job_id: int, attempt: int, owner: str) -> ClaimedJob | None:
    with store.write():
        row = store.handoffs.start(job_id, attempt, owner, d.timeout, store.clock())
        return store.claimed([row])[0] if row is not None else None


async def _keep(
    db: StoreThread,
    d: TaskDef,
    job: ClaimedJob,
    running: asyncio.Task[AttemptResult],
    deadlines: dict[int, float],
) -> None:
    """While the attempt runs: renew its lease every third of the timeout, and cancel an
    async attempt past its deadline (run_attempt reads that as a timeout)."""
    every = max(0.2, d.timeout / 3)
    renew_at = time.monotonic() + every
    while not running.done():
        now = time.monotonic()
        deadline = deadlines.get(job.job_id)
        if deadline is not None and now >= deadline:
            del deadlines[job.job_id]
            running.cancel()
            return
        if now >= renew_at:
            renew_at = now + every
            await _renew(db, d, job)
        wake = min(renew_at, deadline if deadline is not None else renew_at)
        await asyncio.sleep(max(0.01, min(wake - time.monotonic(), 0.5)))


async def _renew(db: StoreThread, d: TaskDef, job: ClaimedJob) -> None:
    try:
        kept = await db.call(db.store.renew, [(job.job_id, job.attempt, d.timeout)])
    except DatabaseUnavailable as error:
        log.warning("lease renewal of job %d failed: %s", job.job_id, error)
        return
    if job.job_id not in kept:
        log.warning("job %d attempt %d: lease lost while running", job.job_id, job.attempt)


async def _commit(db: StoreThread, result: AttemptResult, patience: float) -> CommitReport:
    """Commit, waiting out a database outage for at most *patience* seconds (after that the
    lease lapses anyway, and the attempt is settled as lost)."""
    give_up = time.monotonic() + patience
    delay = 0.2
    while True:
        try:
            return await db.call(commit_resilient, db.store, [result])
        except DatabaseUnavailable as error:
            if time.monotonic() + delay > give_up:
                raise
            log.warning("commit failed, retrying in %.1fs: %s", delay, error)
            await asyncio.sleep(delay)
            delay = min(RETRY_MAX, delay * 2)
