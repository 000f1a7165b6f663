"""Every bounded wait gives way to a cancel, even one that lands as its wait ends.

Python 3.11's ``asyncio.wait_for`` returns normally when what it waits for completes in the
same turn as a cancel of the waiter, and the cancel is lost: the waiter runs on after being
told to stop (a worker never exited; tests/unit/test_worker_wait.py). Each case here sets
what the wait waits for and cancels the waiting task in the same turn; with ``wait_for``
each of them returned instead of raising."""

from __future__ import annotations

import asyncio
import dataclasses
import types
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from trawl.crawl.browser.traffic import Traffic
from trawl.model.records import ClaimedJob
from trawl.runtime import attempt, dryrun
from trawl.runtime.app import TaskDef
from trawl.runtime.context import Context
from trawl.server.dashboard.feed import Feed, Subscriber
from trawl.server.wakeups import Wakeups


def _cancelled_as_it_ends(wait: Callable[[], Awaitable[Any]], end: Callable[[], None]) -> None:
    """Start *wait*, let it get under way, then end what it waits for and cancel it."""

    async def scenario() -> None:
        task = asyncio.create_task(wait())
        for _ in range(3):
            await asyncio.sleep(0)  # under way, parked on what it waits for
        end()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def test_a_journal_follower_wait() -> None:
    wakeups = Wakeups("sqlite:///unused.db")  # SQLite: no listener, nothing connects

    async def wait() -> None:
        wakeups._loop = asyncio.get_running_loop()
        wakeups._event = asyncio.Event()  # made on the test's loop
        await wakeups.wait(10.0)

    _cancelled_as_it_ends(wait, wakeups._fire)


def test_a_dashboard_page_wait() -> None:
    holder: dict[str, Subscriber] = {}

    async def wait() -> None:
        holder["page"] = Subscriber("overview")
        await holder["page"].wait(10.0)

    _cancelled_as_it_ends(wait, lambda: holder["page"].offer({"x": "y"}, []))


def test_the_dashboard_reading_loop() -> None:
    feed = Feed.__new__(Feed)
    feed.refresh = 10.0
    feed._stopping = False
    ticks: list[int] = []

    async def tick() -> None:
        ticks.append(1)

    feed.tick = tick  # type: ignore[method-assign]

    async def run() -> None:
        feed._kick = asyncio.Event()
        await feed._run()

    _cancelled_as_it_ends(run, lambda: feed._kick.set())
    assert ticks == []  # the cancel stopped it before another look at the database


def test_a_browser_page_waiting_for_its_network_to_go_idle() -> None:
    holder: dict[str, Traffic] = {}

    async def wait() -> None:
        traffic = holder["traffic"] = Traffic(types.SimpleNamespace(), fetch=None)  # type: ignore[arg-type]
        traffic._begin()  # one request in flight: the wait is for it to end
        await traffic.idle(10.0)

    _cancelled_as_it_ends(wait, lambda: holder["traffic"]._end())


def _task(fn: Any, *, is_async: bool) -> TaskDef:
    return TaskDef(
        name="t",
        fn=fn,
        is_async=is_async,
        tags=(),
        version="1",
        ttl=None,
        timeout=10.0,
        retries=0,
        backoff=1.0,
        niceness=0,
    )


def _job() -> ClaimedJob:
    return ClaimedJob(job_id=1, item_id="i", task="t", attempt=1, data={}, tags={}, fail_count=0)


def test_a_plain_def_attempt_cancelled_at_shutdown_as_its_thread_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holder: dict[str, asyncio.Future[Any]] = {}

    def in_thread(loop: asyncio.AbstractEventLoop, fn: Any, ctx: Context) -> asyncio.Future[Any]:
        holder["thread"] = loop.create_future()  # ended by the test, not by a thread
        return holder["thread"]

    monkeypatch.setattr(attempt, "_in_daemon_thread", in_thread)

    async def run() -> None:
        ctx = Context(id="i", data={}, tags={}, attempt=1, task="t", reader=None)  # type: ignore[arg-type]
        await attempt.run_attempt(_task(lambda ctx: None, is_async=False), _job(), ctx, None, {})  # type: ignore[arg-type]

    _cancelled_as_it_ends(run, lambda: holder["thread"].set_result("value"))


def test_a_dry_run_interrupted_as_its_task_returns() -> None:
    holder: dict[str, asyncio.Event] = {}

    async def fn(ctx: Context) -> str:
        await holder["returns"].wait()
        return "value"

    async def run() -> None:
        holder["returns"] = asyncio.Event()
        await dryrun._run(_task(fn, is_async=True), _job(), None)  # type: ignore[arg-type]

    _cancelled_as_it_ends(run, lambda: holder["returns"].set())


def test_the_bounded_waits_still_end_on_their_time() -> None:
    async def scenario() -> tuple[Any, ...]:
        page = await Subscriber("overview").wait(0.01)
        wakeups = Wakeups("sqlite:///unused.db")
        wakeups.poll = 0.01
        await wakeups.wait()
        traffic = Traffic(types.SimpleNamespace(), fetch=None)  # type: ignore[arg-type]
        traffic._begin()
        went_idle = await traffic.idle(0.01)

        async def slow(ctx: Context) -> None:
            await asyncio.sleep(10)

        slow_task = dataclasses.replace(_task(slow, is_async=True), timeout=0.01)
        report = await dryrun._run(slow_task, _job(), None)  # type: ignore[arg-type]
        return page, went_idle, report.outcome, report.error

    assert asyncio.run(scenario()) == (({}, []), False, "failed", "TimeoutError: ")
