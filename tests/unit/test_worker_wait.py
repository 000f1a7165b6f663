"""A claim loop's wait gives way to a cancel, even one that lands as its wake fires.

Python 3.11's ``asyncio.wait_for`` returns normally when the awaited event completes in
the same turn as the cancel, swallowing it: a worker whose lane failed cancelled its
other lanes' claim loops, one of them ran on, and the worker never exited."""

from __future__ import annotations

import asyncio
import types

import pytest

from trawl.runtime.worker import Worker


def test_a_cancel_landing_as_the_wake_fires_is_not_swallowed() -> None:
    async def scenario() -> None:
        waiter = types.SimpleNamespace(_wake=asyncio.Event())
        task = asyncio.create_task(Worker._wait(waiter, 10.0))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)  # the wait is under way
        waiter._wake.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def test_the_wait_ends_on_its_wake_or_its_time() -> None:
    async def scenario() -> tuple[bool, bool]:
        waiter = types.SimpleNamespace(_wake=asyncio.Event())
        asyncio.get_running_loop().call_later(0.01, waiter._wake.set)
        await Worker._wait(waiter, 10.0)  # type: ignore[arg-type]
        woken_cleared = not waiter._wake.is_set()
        await Worker._wait(waiter, 0.01)  # nothing wakes it: its time ends it
        return woken_cleared, not waiter._wake.is_set()

    assert asyncio.run(scenario()) == (True, True)
