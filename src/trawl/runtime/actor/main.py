"""One actor process, as the orchestrator starts it: ``python -m trawl.runtime.actor.main``.

It loads the app, runs the actor type's ``on_startup``, then a worker restricted to its
task (and launch key) that exits once its queue stays empty, then ``on_shutdown``. Logs go
to stderr as JSON lines for the orchestrator to relay; the event loop writes a heartbeat.

A plain ``def`` task that runs past its timeout cannot be stopped (Python has no way to
kill a thread): its attempt is recorded as a timeout failure at once, and the actor stops
claiming, lets its other attempts finish within the grace period (releasing the rest), and
exits with :data:`EXIT_REPLACE` so the orchestrator starts a fresh one; exiting is what
kills the stuck thread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from trawl.engine.keyed import claim_keyed
from trawl.model.errors import TrawlError
from trawl.model.records import ClaimedJob
from trawl.runtime import heap, logs, procmetrics
from trawl.runtime import loop as process_loop
from trawl.runtime.actor.handle import ACTOR_DB, EXIT_REPLACE, EXIT_START_FAILED, owner_id
from trawl.runtime.actor.hooks import ActorHooks
from trawl.runtime.actor.spec import ActorInfo, actor_key, set_current
from trawl.runtime.app import App, TaskDef
from trawl.runtime.attempt import TaskTimeout
from trawl.runtime.loader import load_app
from trawl.runtime.plugins import for_app, hookimpl
from trawl.runtime.worker import Worker

log = logging.getLogger("trawl.actor")

BEAT_INTERVAL = 0.5


class ShedStuckThreads:
    """Built-in plugin: a plain ``def`` attempt that timed out makes the actor exit."""

    def __init__(self, task: TaskDef) -> None:
        self.task = task
        self.worker: Worker | None = None
        self.tripped = False

    @hookimpl
    def trawl_actor_tick_exception(self, job: ClaimedJob, exception: BaseException) -> None:
        if self.task.is_async or not isinstance(exception, TaskTimeout) or self.tripped:
            return
        self.tripped = True
        log.warning(
            "%s on %s is stuck past its timeout on a thread that cannot be stopped; "
            "this actor exits to shed it and will be replaced",
            job.task,
            job.item_id,
        )
        if self.worker is not None:
            self.worker.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    heap.tune()
    logs.setup(args.log_level, as_json=True)  # the orchestrator relays the lines
    os.set_blocking(args.beat_fd, False)
    try:
        app = load_app(args.app)
        task = app.get(args.task)
    except TrawlError as error:
        log.error("cannot start: %s", error)
        return EXIT_START_FAILED
    info = ActorInfo(
        type=task.name,
        key=args.key,
        pid=os.getpid(),
        owner=owner_id(os.getpid(), args.token),
        tasks=(task.name,),
    )
    return process_loop.run(_run(app, task, info, args))


async def _run(app: App, task: TaskDef, info: ActorInfo, args: argparse.Namespace) -> int:
    shed = ShedStuckThreads(task)
    worker = Worker(
        app,
        url=_database(),
        concurrency=args.concurrency,
        tasks=[task.name],
        exit_when_idle=True,
        grace=args.grace,
        owner=info.owner,
        hooks=ActorHooks(for_app(app, shed, *_metrics()), info),
        claim=_keyed_claim(task, info) if info.key is not None else None,
        linger=task.actor.linger,
    )
    shed.worker = worker
    beat = asyncio.create_task(_heartbeat(args.beat_fd, worker))
    try:
        try:
            resource = await _call(task.actor.on_startup, info)
        except Exception:
            log.exception("on_startup of actor type %s failed", task.name)
            return EXIT_START_FAILED
        info = replace(info, resource=resource)
        worker.hooks.actor = info
        set_current(info)
        try:
            code = await worker.run()  # EXIT_REPLACE: it shed abandoned async attempts
        finally:
            await _shutdown(task, info, resource)
    finally:
        beat.cancel()
    return EXIT_REPLACE if shed.tripped or code == EXIT_REPLACE else 0


async def _shutdown(task: TaskDef, info: ActorInfo, resource: Any) -> None:
    try:
        await _call(task.actor.on_shutdown, info, resource)
    except Exception:
        log.exception("on_shutdown of actor type %s failed", task.name)


async def _call(fn: Callable[..., Any] | None, *args: Any) -> Any:
    """Run a start-up or shut-down function: awaited if async, else on a thread (so the
    heartbeat goes on while a browser starts)."""
    if fn is None:
        return None
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    value = await asyncio.to_thread(fn, *args)
    return await value if inspect.isawaitable(value) else value


def _metrics() -> list[object]:
    """The process metrics plugin when the orchestrator serves metrics (--metrics-port): it
    set the directory the actors' samples go to in their environment."""
    if not os.environ.get(procmetrics.MULTIPROC):
        return []
    return [procmetrics.ProcessMetrics()]


def _keyed_claim(task: TaskDef, info: ActorInfo) -> Callable[..., Any]:
    key_fn, key = task.actor.key, info.key
    assert key_fn is not None, "a keyed actor needs its task's key function"
    assert key is not None
    return lambda store, limit: claim_keyed(
        store,
        task=task.name,
        timeout=task.timeout,
        key_of=partial(actor_key, key_fn),
        key=key,
        limit=limit,
        owner=info.owner,
    )


async def _heartbeat(fd: int, worker: Worker) -> None:
    """Tell the orchestrator this loop is alive; stop gracefully once it is gone."""
    while True:
        try:
            os.write(fd, b".")
        except BlockingIOError:
            pass  # the orchestrator is behind on reading: it knows we are alive
        except OSError:
            log.warning("the orchestrator is gone: finishing running tasks and exiting")
            with contextlib.suppress(AttributeError):  # not started yet: nothing to stop
                worker.stop()
            return
        await asyncio.sleep(BEAT_INTERVAL)


def _database() -> str:
    url = os.environ.get(ACTOR_DB)
    if not url:
        raise SystemExit(f"{ACTOR_DB} is not set: actors are started by `trawl run`")
    return url


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trawl-actor", description=__doc__)
    parser.add_argument("--app", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--key", default=None)
    parser.add_argument("--token", required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("--beat-fd", type=int, required=True)
    parser.add_argument("--log-level", default="info")
    return parser


def _exit(code: int) -> None:
    """Exit now, even past a thread stuck in a task (it dies with the process)."""
    logging.shutdown()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
