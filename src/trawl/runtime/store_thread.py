"""The worker's database thread: store calls run there, one at a time, off the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from trawl.model.records import ItemView
from trawl.store.store import Store

P = ParamSpec("P")
T = TypeVar("T")


class StoreThread:
    """Async face of a :class:`Store` whose connection lives on one dedicated thread."""

    def __init__(self, store: Store, *, name: str = "trawl-db") -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    async def with_store(self, fn: Callable[[Store], T]) -> T:
        """``fn(store)`` on the database thread (Context.with_store)."""
        return await self.call(fn, self.store)

    async def get_item(self, alias: str) -> ItemView | None:
        return await self.call(self.store.get_item, alias)

    async def get_metadata(self, task: str, alias: str) -> dict[str, Any] | None:
        return await self.call(self.store.get_metadata, task, alias)

    def close(self) -> None:
        self._pool.submit(self.store.close).result()
        self._pool.shutdown(wait=True)
