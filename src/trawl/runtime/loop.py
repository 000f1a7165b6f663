"""A process's event loop, run like ``asyncio.run`` but with an end that cannot hang.

When the main coroutine returns, ``asyncio.run`` cancels every task still running and waits
for all of them, however long that takes. A task that catches its ``CancelledError`` and
goes on (user code, which the worker abandons after its grace period) would so keep the
process alive for ever after its work is done: ``trawl worker --exit-when-idle`` never
exited, and a SIGTERM'd worker lingered until SIGKILL. Here the leftover tasks get
:data:`LEFTOVER_GRACE` seconds after their cancellation; those still running then are
left behind, named in a warning, and the loop is closed without them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger("trawl.worker")

T = TypeVar("T")

LEFTOVER_GRACE = 2.0  # seconds a task still running at the end gets after its cancellation


def run(main: Coroutine[Any, Any, T], *, grace: float = LEFTOVER_GRACE) -> T:
    """Run *main* on a new event loop and return its result; then end what it left running,
    waiting at most *grace* seconds for it."""
    runner = asyncio.Runner()
    try:
        return runner.run(main)
    finally:
        loop = runner.get_loop()
        left = runner.run(_cancel_leftovers(grace))
        if left:
            log.warning(
                "%d task(s) still running %gs after being cancelled, left behind at exit: %s",
                len(left),
                grace,
                ", ".join(left),
            )
            # Runner.close() would wait for them again; the default executor's threads are
            # not waited for either (a daemon-like end, as for an abandoned task's thread).
            asyncio.set_event_loop(None)
            loop.close()
        else:
            runner.close()


async def _cancel_leftovers(grace: float) -> list[str]:
    """Cancel every other task of this loop; the names of those still running *grace*
    seconds later."""
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    if not tasks:
        return []
    for task in tasks:
        task.cancel()
    done, pending = await asyncio.wait(tasks, timeout=grace)
    loop = asyncio.get_running_loop()
    for task in done:  # what asyncio.run reports of a task that failed as it was cancelled
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )
    for task in pending:
        # Named in the warning above: asyncio's "Task was destroyed but it is pending!" when
        # the closed loop's tasks are collected would only say it again, as an error.
        task._log_destroy_pending = False  # type: ignore[attr-defined]
    return sorted(task.get_name() for task in pending)
