"""Running the live layer's coroutines from plain tests, and actors the tests share."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import msgspec

from tests.support.uvicorn_thread import in_thread
from trawl.live import Actor, Sentinel, action

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await main()

    return asyncio.run(bounded())


async def until(check: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    """Poll *check* (state that no event announces) every 10 ms for *seconds*."""
    try:
        async with asyncio.timeout(seconds):
            while not check():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


class Add(msgspec.Struct, frozen=True):
    n: int


class Counter(Actor):
    def __init__(self) -> None:
        self.total = 0
        self.seen: list[Any] = []
        self.sentinels: list[Sentinel] = []

    @action()
    async def add(self, message: Add) -> int:
        self.seen.append(message)
        self.total += message.n
        return self.total

    @action()
    async def fail(self, message: str) -> None:
        raise RuntimeError(message)

    @action()
    async def halt(self, message: None) -> None:
        self.ctx.stop()

    @action()
    async def stall(self, message: None) -> None:
        await asyncio.Event().wait()

    async def on_sentinel(self, sentinel: Sentinel) -> None:
        self.sentinels.append(sentinel)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """*app* on a real uvicorn (a thread of this process) on a free port; yields ws://…"""
    with in_thread(app, "live") as port:
        yield f"ws://127.0.0.1:{port}"
