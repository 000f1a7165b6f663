"""Database connections lent to requests: a Store is one connection used by one thread at a
time, so requests borrow one from a bounded pool and run their store calls in a thread."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable
from typing import TypeVar

from trawl.store.store import Store

T = TypeVar("T")


class Stores:
    """At most *size* connections, opened when first needed and kept for the next request."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.size = size
        self._idle: queue.SimpleQueue[Store] = queue.SimpleQueue()
        self._all: list[Store] = []
        self._slots: asyncio.Semaphore | None = None

    async def run(self, fn: Callable[[Store], T]) -> T:
        """``fn(store)`` in a worker thread, with a connection of the pool.

        A caller cancelled mid-call (its session ended) stops waiting, but the thread runs
        on: the connection and its slot come back only when the thread is done with them,
        so no other request can share a connection that is still in use."""
        if self._slots is None:  # made in the server's event loop, not at import
            self._slots = asyncio.Semaphore(self.size)
        slots = self._slots
        await slots.acquire()
        store = self._take()

        def give_back(work: asyncio.Future[T]) -> None:
            self._idle.put(store)
            slots.release()
            if not work.cancelled():
                work.exception()  # retrieved: a caller that left cannot see it

        work = asyncio.ensure_future(asyncio.to_thread(fn, store))
        work.add_done_callback(give_back)
        return await asyncio.shield(work)

    def _take(self) -> Store:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            store = Store(self.url)
            self._all.append(store)
            return store

    def close(self) -> None:
        for store in self._all:
            store.close()
        self._all.clear()
