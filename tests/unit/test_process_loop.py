"""trawl.runtime.loop: asyncio.run's life cycle, with an end that cannot hang."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time

import pytest

from trawl.runtime import loop

kept: list[asyncio.Task[None]] = []  # the tasks main leaves running, referenced


async def _stubborn(started: asyncio.Event) -> None:
    """A task that catches its cancellation and goes on, as user code may."""
    started.set()
    while True:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.05)


def test_the_result_comes_back_and_a_leftover_task_is_cancelled_and_awaited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ended: list[str] = []

    async def polite() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            ended.append("cleaned up")

    async def main() -> int:
        kept.append(asyncio.create_task(polite()))
        await asyncio.sleep(0)
        return 42

    assert loop.run(main()) == 42
    assert ended == ["cleaned up"]
    assert "left behind" not in caplog.text


def test_a_task_that_swallows_its_cancellation_is_left_behind_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> str:
        started = asyncio.Event()
        kept.append(asyncio.create_task(_stubborn(started), name="stubborn on sku:1"))
        await started.wait()
        return "done"

    began = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert loop.run(main(), grace=0.3) == "done"
        assert 0.3 <= time.monotonic() - began < 5
        # Collected now, the left task would have asyncio say it again, as an error.
        kept.clear()
        gc.collect()
    assert "1 task(s) still running 0.3s after being cancelled" in caplog.text
    assert "stubborn on sku:1" in caplog.text
    assert "Task was destroyed" not in caplog.text


def test_an_error_from_main_is_raised_after_the_leftovers_are_ended() -> None:
    async def main() -> None:
        started = asyncio.Event()
        kept.append(asyncio.create_task(_stubborn(started)))
        await started.wait()
        raise ValueError("main failed")

    with pytest.raises(ValueError, match="main failed"):
        loop.run(main(), grace=0.1)
    # the loop is gone: a new one can run
    assert loop.run(asyncio.sleep(0, result="again")) == "again"
