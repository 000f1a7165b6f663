"""A worker's requests in flight per crawl (crawl/inflight.py): at most the crawl's
concurrency, handed on first come first served, never lost to a cancelled waiter."""

from __future__ import annotations

import asyncio

import pytest

from trawl.crawl.inflight import InFlight


async def _waiting(in_flight: InFlight, crawl_id: int) -> asyncio.Task[object]:
    task = asyncio.create_task(in_flight.acquire(crawl_id))
    await asyncio.sleep(0)  # it runs up to its wait
    return task


def test_the_crawl_concurrency_bounds_requests_and_a_release_hands_one_on() -> None:
    async def scenario() -> None:
        in_flight = InFlight()
        in_flight.limit(1, 2)
        first, second = await in_flight.acquire(1), await in_flight.acquire(1)
        third = await _waiting(in_flight, 1)
        assert not third.done()
        assert in_flight.held(1) == 2
        first.release()
        first.release()  # twice is harmless: every way out of a fetch releases
        await asyncio.sleep(0)
        assert third.done()
        assert in_flight.held(1) == 2
        second.release()
        assert in_flight.held(1) == 1

    asyncio.run(scenario())


def test_crawls_are_counted_apart_and_an_unknown_or_paused_crawl_is_not_held_here() -> None:
    async def scenario() -> None:
        in_flight = InFlight()
        in_flight.limit(1, 1)
        await in_flight.acquire(1)
        other = [await in_flight.acquire(2) for _ in range(5)]  # no plan seen yet: no limit
        assert in_flight.held(2) == 5
        assert in_flight.held(1) == 1
        in_flight.limit(3, 0)  # paused: the gate defers its pages, nobody waits here
        assert [await in_flight.acquire(3) for _ in range(3)]
        for permit in other:
            permit.release()
        assert in_flight.held(2) == 0

    asyncio.run(scenario())


def test_waiters_go_in_the_order_they_came_and_a_raised_limit_lets_them_go() -> None:
    async def scenario() -> None:
        in_flight = InFlight()
        in_flight.limit(1, 1)
        held = await in_flight.acquire(1)
        order: list[int] = []

        async def wait(n: int) -> None:
            await in_flight.acquire(1)
            order.append(n)

        tasks = [asyncio.create_task(wait(n)) for n in range(4)]
        await asyncio.sleep(0)
        held.release()
        await asyncio.sleep(0)
        assert order == [0]
        in_flight.limit(1, 4)  # `trawl crawl concurrency ID 4` while pages wait
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2, 3]
        assert in_flight.held(1) == 4

    asyncio.run(scenario())


@pytest.mark.parametrize("handed_first", [False, True])
def test_a_cancelled_waiter_neither_keeps_nor_loses_a_request(handed_first: bool) -> None:
    async def scenario() -> None:
        in_flight = InFlight()
        in_flight.limit(1, 1)
        held = await in_flight.acquire(1)
        waiter = await _waiting(in_flight, 1)
        if handed_first:  # the request was handed over, then its fetch was cancelled
            held.release()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        if not handed_first:
            held.release()
        assert in_flight.held(1) == 0
        assert await asyncio.wait_for(in_flight.acquire(1), 1)

    asyncio.run(scenario())


def test_a_fetch_waits_at_most_its_time_then_steps_back_leaving_the_queue_clean() -> None:
    async def scenario() -> None:
        in_flight = InFlight()
        in_flight.limit(1, 1)
        held = await in_flight.acquire(1)
        assert await in_flight.acquire(1, within=0.05) is None  # the request stayed out
        later = await _waiting(in_flight, 1)
        held.release()  # goes to the fetch still waiting, not the one that gave up
        assert (await asyncio.wait_for(later, 1)) is not None
        assert in_flight.held(1) == 1

    asyncio.run(scenario())


@pytest.mark.parametrize(("share", "concurrency", "mine"), [(2, 5, 3), (3, 16, 6), (4, 2, 1)])
def test_a_process_sharing_a_crawl_keeps_to_its_part_rounded_up(
    share: int, concurrency: int, mine: int
) -> None:
    async def scenario() -> None:
        in_flight = InFlight(share)
        in_flight.limit(1, concurrency)
        held = [await in_flight.acquire(1) for _ in range(mine)]
        assert None not in held
        assert await in_flight.acquire(1, within=0.01) is None

    asyncio.run(scenario())


def test_a_share_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="1/N for N >= 1, not 1/0"):
        InFlight(0)
