"""User code that runs while the database is locked runs with a time limit.

Merge and update callbacks (``ctx.update_data(lambda old: ...)``) are applied inside the
commit transaction, crawl rule hooks inside the politeness gate's, and limit key functions
inside the claim's: a callback that hangs would hold the write lock, and on SQLite every
other writer, for ever. They run on a small pool of threads instead, and past the limit the
caller gives up (the attempt, page or key gets an error) and the lock is released; the
abandoned call keeps its thread until it returns, so the pool is larger than one.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import ParamSpec, TypeVar

from trawl.model.errors import TrawlError

LIMIT = 10.0  # seconds user code may hold the database
P = ParamSpec("P")
T = TypeVar("T")

_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="trawl-user-code")


class UserCodeTimeout(TrawlError):
    """A callback ran past its time limit while the database was locked."""


def bounded(what: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)``, or UserCodeTimeout naming *what* after :data:`LIMIT`."""
    limit = LIMIT  # read at each call, so a test may lower it
    future = _pool.submit(fn, *args, **kwargs)
    try:
        return future.result(timeout=limit)
    except FutureTimeout:
        raise UserCodeTimeout(
            f"{what} ran longer than {limit:g}s while the database was locked: given up"
        ) from None
