"""The worker's database thread: store calls run there, one at a time, off the event loop.

A call is a hop: the loop hands the thread a function and waits for its result. A crawl
makes several a page, so the hop is kept cheap: calls queue in a deque the thread drains in
order, and results go back to the loop as they are ready, with one wake-up of the loop for
all the results it has not yet picked up (a ThreadPoolExecutor pays a work item, a
concurrent future, a chained asyncio future and a wake-up per call).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from trawl.model.records import ItemView
from trawl.store.store import Store

P = ParamSpec("P")
T = TypeVar("T")

_Call = tuple[Callable[[], Any], asyncio.Future[Any]]


class StoreThread:
    """Async face of a :class:`Store` whose connection lives on one dedicated thread."""

    def __init__(self, store: Store, *, name: str = "trawl-db") -> None:
        self.store = store
        self._calls: deque[_Call] = deque()
        self._wake = threading.Condition()
        self._closing = False
        self._results = _Results()
        # A daemon, so a thread nobody closed cannot hold the interpreter open; at exit the
        # calls already queued still run (as a ThreadPoolExecutor's would).
        self._thread = threading.Thread(target=self._serve, name=f"{name}_0", daemon=True)
        self._thread.start()
        _open.add(self)

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._wake:
            if self._closing:
                raise RuntimeError("the database thread is closed")
            self._calls.append((lambda: fn(*args, **kwargs), done))
            self._wake.notify()
        return await done

    async def with_store(self, fn: Callable[[Store], T]) -> T:
        """``fn(store)`` on the database thread (Context.with_store)."""
        return await self.call(fn, self.store)

    async def get_item(self, alias: str) -> ItemView | None:
        return await self.call(self.store.get_item, alias)

    async def get_metadata(self, task: str, alias: str) -> dict[str, Any] | None:
        return await self.call(self.store.get_metadata, task, alias)

    def close(self) -> None:
        """Finish the calls queued, close the store on its thread, and end the thread."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _serve(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._calls and not self._closing:
                        self._wake.wait()
                    if not self._calls:
                        return
                    fn, done = self._calls.popleft()
                if done.cancelled():  # its caller gave up before it ran
                    continue
                value, error = None, None
                try:
                    value = fn()
                except BaseException as raised:  # handed to the caller, as an executor does
                    error = raised
                self._results.put(done, value, error)
        finally:
            self.store.close()


class _Results:
    """Results on their way back to their loops: the first one a loop has not picked up
    schedules the pick-up (one wake-up of the loop); the rest join it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[asyncio.AbstractEventLoop, list[tuple[Any, Any, Any]]] = {}

    def put(self, done: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
        loop = done.get_loop()
        with self._lock:
            waiting = self._waiting.get(loop)
            if waiting is not None:
                waiting.append((done, value, error))
                return
            self._waiting[loop] = [(done, value, error)]
        try:
            loop.call_soon_threadsafe(self._deliver, loop)
        except RuntimeError:  # the loop closed: nobody is waiting any more
            with self._lock:
                self._waiting.pop(loop, None)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            ready = self._waiting.pop(loop, [])
        for done, value, error in ready:
            if done.done():  # cancelled while it ran
                continue
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(value)


_open: weakref.WeakSet[StoreThread] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for thread in list(_open):
        thread.close()
