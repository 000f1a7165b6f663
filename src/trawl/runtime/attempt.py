"""Running one attempt: call the task's function with its Context, within its timeout, and
say how it ended as the :class:`AttemptResult` its commit writes.

The worker decides when attempts start and where their results go; this module only knows
what one attempt is. An async task is cancelled by the worker's watchdog past its deadline
(one timer for all attempts); a plain ``def`` task runs on a daemon thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import traceback
from collections.abc import Callable, MutableMapping
from typing import Any

from trawl.model.errors import InvalidData, NotFound
from trawl.model.records import AttemptResult, ClaimedJob, FailureInfo
from trawl.model.states import Outcome
from trawl.runtime.actor.hooks import ActorHooks
from trawl.runtime.app import TaskDef
from trawl.runtime.context import Context, asks
from trawl.runtime.outcome import attempt_result
from trawl.store import codec


class TaskTimeout(Exception):
    """An attempt ran past its task's timeout."""


async def run_attempt(
    d: TaskDef,
    job: ClaimedJob,
    ctx: Context,
    hooks: ActorHooks,
    deadlines: MutableMapping[int, float],
) -> AttemptResult:
    """Run *job*'s attempt to its end. An async attempt's deadline (monotonic) goes into
    *deadlines* for the watchdog, which removes it when it cancels the attempt: a
    cancellation with the deadline gone is a timeout; any other (the worker giving up at
    shutdown) propagates. (Not a cancel message: user code between may drop it.)"""
    started = time.monotonic()
    try:
        if d.is_async:
            deadlines[job.job_id] = started + d.timeout
            value = await d.fn(ctx)
        else:
            # A thread cannot be cancelled: the timeout abandons its future instead. Not
            # wait_for: on 3.11 it swallows a shutdown's cancel that lands as the thread
            # ends, and the attempt ran on to a commit the worker had given up on.
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(d.timeout):
                value = await _in_daemon_thread(loop, d.fn, ctx)
        encoded = None if value is None else _encode_result(d.name, value)
    except asyncio.CancelledError:
        if not d.is_async or job.job_id in deadlines:
            raise
        return _failed(d, job, ctx, hooks, _timeout(d, started), "")
    except TimeoutError as error:
        if time.monotonic() - started >= d.timeout:
            return _failed(d, job, ctx, hooks, _timeout(d, started), "")
        return _failed(d, job, ctx, hooks, error, _trace(error))
    except Exception as error:
        return _failed(d, job, ctx, hooks, error, _trace(error))
    return attempt_result(d, job, ctx, _ended(ctx), result=encoded)


def abandoned(
    d: TaskDef, job: ClaimedJob, ctx: Context, hooks: ActorHooks, started: float
) -> AttemptResult:
    """A timeout failure for an async attempt that went on after it was cancelled at its
    timeout (it caught the CancelledError): the worker stops waiting for it."""
    error = TaskTimeout(
        f"task {d.name!r} exceeded its timeout of {d.timeout:g}s and did not stop when "
        f"cancelled (abandoned after {time.monotonic() - started:.1f}s)"
    )
    return _failed(d, job, ctx, hooks, error, "")


def released(d: TaskDef, job: ClaimedJob, ctx: Context) -> AttemptResult:
    """The attempt was stopped before it ended: its job is handed back, due again."""
    return attempt_result(d, job, ctx, Outcome.RELEASED)


def _failed(
    d: TaskDef,
    job: ClaimedJob,
    ctx: Context,
    hooks: ActorHooks,
    error: BaseException,
    trace: str,
) -> AttemptResult:
    if hooks.ticks:
        hooks.tick_exception(job, error)
    failure = FailureInfo(
        error_type=type(error).__name__,
        message=str(error) or type(error).__name__,
        traceback=trace,
    )
    return attempt_result(
        d, job, ctx, Outcome.FAILURE, failure=failure, not_found=isinstance(error, NotFound)
    )


def _in_daemon_thread(
    loop: asyncio.AbstractEventLoop, fn: Callable[[Context], Any], ctx: Context
) -> asyncio.Future[Any]:
    """Run a plain ``def`` task on a thread of its own.

    Not a ThreadPoolExecutor: its threads are joined at interpreter exit, so a task stuck
    past its timeout or the grace period would keep the worker from exiting, and would hold
    a pool slot that later tasks queue behind. A daemon thread is simply abandoned.
    """
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return  # timed out or cancelled meanwhile: the result is not wanted
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def run() -> None:
        try:
            value, error = fn(ctx), None
        except BaseException as failure:
            value, error = None, failure
        finally:
            _running_threads.pop(threading.current_thread(), None)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
            loop.call_soon_threadsafe(settle, value, error)

    thread = threading.Thread(target=run, name=f"trawl-task-{ctx.task}", daemon=True)
    _running_threads[thread] = future
    thread.start()
    return future


# Each plain def task's thread while it runs, with the future its attempt waits on.
_running_threads: dict[threading.Thread, asyncio.Future[Any]] = {}


def stuck_threads() -> int:
    """Threads of plain ``def`` tasks still running after their attempt stopped waiting for
    them (past the timeout, or released at shutdown): nothing can stop them but the process's
    end."""
    return sum(1 for future in list(_running_threads.values()) if future.done())


def _ended(ctx: Context) -> Outcome:
    """How a task that returned ended: deferred or skipped if it said so, else a success."""
    asked = asks(ctx)
    if asked.skip:
        return Outcome.SKIPPED
    return Outcome.SUCCESS if asked.defer_until is None else Outcome.DEFERRED


def _encode_result(task: str, value: Any) -> str:
    if not isinstance(value, dict):
        raise InvalidData(
            f"task {task!r} returned {type(value).__name__}: a result must be a JSON object "
            "(a dict) or None"
        )
    try:
        return codec.dumps(value)
    except InvalidData as error:
        reason = str(error).removeprefix("value is not JSON-serialisable: ")
        raise InvalidData(
            f"task {task!r} returned a result that is not JSON-serialisable: {reason}"
        ) from None


def _timeout(d: TaskDef, started: float) -> TaskTimeout:
    return TaskTimeout(
        f"task {d.name!r} exceeded its timeout of {d.timeout:g}s "
        f"(ran {time.monotonic() - started:.1f}s)"
    )


def _trace(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))
