"""The worker's database thread: calls run in order on one thread, results and errors go
back to their callers, a call whose caller gave up is not run, closing finishes what is
queued, and results ready together wake the event loop once."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from trawl.runtime.store_thread import StoreThread


class _Store:
    """Stands in for a Store: the thread hands it to calls and closes it at the end."""

    def __init__(self) -> None:
        self.closed_on: str | None = None

    def close(self) -> None:
        self.closed_on = threading.current_thread().name


def _thread() -> tuple[StoreThread, _Store]:
    store = _Store()
    return StoreThread(store, name="test-db"), store  # type: ignore[arg-type]


def test_calls_run_in_order_on_the_thread_and_errors_reach_their_callers() -> None:
    thread, store = _thread()
    ran: list[tuple[int, str]] = []

    def note(n: int) -> int:
        ran.append((n, threading.current_thread().name))
        if n == 2:
            raise ValueError("two")
        return n * 10

    async def main() -> list[Any]:
        return await asyncio.gather(
            *(thread.call(note, n) for n in range(5)), return_exceptions=True
        )

    results = asyncio.run(main())
    thread.close()
    assert [n for n, _ in ran] == [0, 1, 2, 3, 4]
    assert {name for _, name in ran} == {"test-db_0"}
    assert results[:2] == [0, 10]
    assert results[3:] == [30, 40]
    assert isinstance(results[2], ValueError)
    assert store.closed_on == "test-db_0"


def test_a_call_whose_caller_gave_up_before_it_ran_is_not_run() -> None:
    thread, _ = _thread()
    go = threading.Event()
    ran: list[str] = []

    async def main() -> None:
        blocker = asyncio.create_task(thread.call(go.wait, 5))
        await asyncio.sleep(0.05)  # the thread is in go.wait
        given_up = asyncio.create_task(thread.call(ran.append, "given up"))
        kept = asyncio.create_task(thread.call(ran.append, "kept"))
        await asyncio.sleep(0)
        given_up.cancel()
        go.set()
        await asyncio.gather(blocker, kept)
        with pytest.raises(asyncio.CancelledError):
            await given_up

    asyncio.run(main())
    thread.close()
    assert ran == ["kept"]


def test_closing_runs_what_is_queued_then_closes_the_store() -> None:
    thread, store = _thread()
    go = threading.Event()
    ran: list[int] = []

    async def main() -> None:
        first = asyncio.create_task(thread.call(go.wait, 5))
        queued = [asyncio.create_task(thread.call(ran.append, n)) for n in range(3)]
        await asyncio.sleep(0.05)
        closing = asyncio.create_task(asyncio.to_thread(thread.close))
        await asyncio.sleep(0.05)
        go.set()
        await asyncio.gather(first, *queued, closing)

    asyncio.run(main())
    assert ran == [0, 1, 2]
    assert store.closed_on == "test-db_0"
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(thread.call(ran.append, 9))


def test_results_ready_together_wake_the_loop_once() -> None:
    thread, _ = _thread()
    go = threading.Event()
    wakeups = 0

    async def main() -> list[int]:
        nonlocal wakeups
        loop = asyncio.get_running_loop()
        original = loop.call_soon_threadsafe

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakeups
            wakeups += 1
            return original(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        first = asyncio.create_task(thread.call(go.wait, 5))
        rest = [asyncio.create_task(thread.call(int, n)) for n in range(20)]
        await asyncio.sleep(0.05)
        # The loop is busy (not awaiting) while the thread finishes all 21 calls.
        go.set()
        threading.Event().wait(0.2)
        await first
        return list(await asyncio.gather(*rest))

    assert asyncio.run(main()) == list(range(20))
    thread.close()
    assert wakeups == 1
