"""Running a crawl from the command line: a worker in this process, watched until the crawl
finishes (or is stopped), reporting progress as it goes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from trawl.crawl import operations, state
from trawl.crawl.app import make_app
from trawl.crawl.inflight import SLOTS_PER_REQUEST, InFlight
from trawl.crawl.operations import Progress
from trawl.runtime.store_thread import StoreThread
from trawl.runtime.worker import Worker
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import SMALL_CACHE_MIB, Store

OnProgress = Callable[[Progress], None]
EVERY = 0.5
EVERY_MAX = 5.0
# `trawl crawl` runs SLOTS_PER_REQUEST (2) worker slots a request: a page waiting for its
# turn at a request beside each page fetching. The worker claims again once half of its
# slots are free, not the quarter a worker waits for: every request still has a page
# ready, and claims, with the commits that ride with them, come in larger batches. With
# two processes on PostgreSQL a 20,000-page crawl ran 13 % fewer transactions, and both
# backends spent less CPU a page (CHANGELOG, issue 18).
CLAIM_WHEN_FREE = 1 / SLOTS_PER_REQUEST


async def run(
    url: str,
    crawl_id: int,
    *,
    concurrency: int,
    lease: float,
    on_progress: OnProgress | None = None,
    grace: float = 10.0,
    plugins: Sequence[object] = (),
    share: int = 1,
    every: float = EVERY,
) -> Progress:
    """Work on the database's crawls until crawl *crawl_id* is finished or aborted, or a
    signal stops the worker; returns the crawl's last progress. *share*: processes working
    on the crawl together, this one included (each keeps to its part of the concurrency).
    *every*: how often, at least, the crawl's pages are counted (a live line's pace), and
    at most every :data:`EVERY` once the worker runs out of work, to see the crawl end."""
    state.runtime().in_flight = InFlight(share)
    app = make_app(url, lease=lease)
    app.plugins.extend(plugins)
    worker = Worker(
        app,
        url=url,
        concurrency=concurrency,
        # Pages only, not the recurring schedules every app serves: this process ends with
        # its crawl and stops what it runs then, so a schedule's action taken up here (an
        # hour-long `add --file`) would be killed and run again. Workers serve schedules.
        tasks=[FETCH_TASK],
        grace=grace,
        poll=0.1,
        claim_when_free=CLAIM_WHEN_FREE,
    )
    watcher = StoreThread(Store(url, cache_mib=SMALL_CACHE_MIB))  # reads counts only
    working = asyncio.create_task(worker.run())
    try:
        last = await _watch(watcher, crawl_id, worker, working, on_progress, every)
        await working
        last = await watcher.call(operations.progress, watcher.store, crawl_id)
    finally:
        if not working.done():
            worker.stop()
            with contextlib.suppress(Exception):
                await working
        await state.shutdown()
        await asyncio.to_thread(watcher.close)
    if on_progress is not None:
        on_progress(last)
    return last


async def _watch(
    watcher: StoreThread,
    crawl_id: int,
    worker: Worker,
    working: asyncio.Task[int],
    on_progress: OnProgress | None,
    every: float,
) -> Progress:
    while True:
        started = time.monotonic()
        last = await watcher.call(operations.progress, watcher.store, crawl_id)
        cost = time.monotonic() - started
        if on_progress is not None:
            on_progress(last)
        if last.status in (operations.FINISHED, operations.ABORTED) and not last.claimed:
            worker.stop()
            return last
        # Counting a big crawl's pages takes a while: keep it under a tenth of the time.
        soonest = max(min(every, EVERY), min(EVERY_MAX, 10 * cost))
        done, _ = await asyncio.wait([working], timeout=soonest)
        if done:
            return last
        # Past that, count again at the display's pace, or as soon as the worker finds
        # nothing to claim: the crawl may be over.
        if every > soonest and not worker.dry.is_set():
            dry = asyncio.create_task(worker.dry.wait())
            try:
                done, _ = await asyncio.wait(
                    [working, dry], timeout=every - soonest, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                dry.cancel()
            if working in done:
                return last
