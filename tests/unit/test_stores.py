"""The server's connection pool lends one connection to one call at a time, even when a
caller is cancelled while its call still runs in a thread."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from trawl.server.stores import Stores
from trawl.store.store import Store


def test_a_cancelled_call_keeps_its_connection_until_its_thread_is_done(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pool.db'}"
    Store(url).close()  # the schema, made once
    stores = Stores(url, size=2)
    release = threading.Event()
    in_use: set[int] = set()
    shared: list[int] = []

    def hold(store: Store) -> int:
        if id(store) in in_use:
            shared.append(id(store))
        in_use.add(id(store))
        try:
            release.wait(10)
            return id(store)
        finally:
            in_use.discard(id(store))

    def quick(store: Store) -> int:
        if id(store) in in_use:
            shared.append(id(store))
        return id(store)

    async def main() -> None:
        slow = asyncio.create_task(stores.run(hold))
        await asyncio.sleep(0.1)  # its thread holds the connection now
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        held = next(iter(in_use))
        assert await stores.run(quick) != held  # a second connection, not the busy one
        release.set()
        for _ in range(100):  # the thread finishes and gives its connection back
            if not in_use:
                break
            await asyncio.sleep(0.02)
        assert await stores.run(quick) in {held, *[id(s) for s in stores._all]}

    try:
        asyncio.run(main())
    finally:
        stores.close()
    assert shared == []


def test_a_full_pool_waits_for_a_cancelled_call_to_finish(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pool.db'}"
    Store(url).close()
    stores = Stores(url, size=1)
    release = threading.Event()
    order: list[str] = []

    def hold(store: Store) -> None:
        release.wait(10)
        order.append("held")

    def after(store: Store) -> None:
        order.append("after")

    async def main() -> None:
        slow = asyncio.create_task(stores.run(hold))
        await asyncio.sleep(0.1)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        waiting = asyncio.create_task(stores.run(after))
        await asyncio.sleep(0.1)
        assert not waiting.done()  # the only connection is still in the cancelled call's thread
        release.set()
        await asyncio.wait_for(waiting, 10)

    try:
        asyncio.run(main())
    finally:
        stores.close()
    assert order == ["held", "after"]
