"""One Celery task per trawl task with ``executor="celery"``, running it through trawl."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery

from trawl.model.errors import InvalidInput
from trawl.runtime.app import App, TaskDef
from trawl.runtime.handoff import HandoffRunner

EXECUTOR = "celery"


def celery_name(task: str) -> str:
    """The Celery task name of trawl task *task*."""
    return f"trawl.{task}"


def bind(app: App, celery_app: Celery, *, db: str | None = None) -> dict[str, Any]:
    """Register a Celery task for each of *app*'s tasks with ``executor="celery"``, on its
    queue (``trawl.<task>`` unless the task sets ``queue=``), and remember *celery_app* as
    the app's Celery executor for ``trawl feed celery``. Returns the Celery tasks by trawl
    task name.

    Each message carries a job and its attempt; the Celery task takes the job, runs the
    trawl task's function with the usual ``Context``, and commits through trawl (to *db*,
    else the app's database) with the attempt's fence.
    """
    if not isinstance(celery_app, Celery):
        raise InvalidInput(f"bind needs a celery.Celery app, got {type(celery_app).__name__}")
    runner = HandoffRunner(app, EXECUTOR, url=db)
    app.executors[EXECUTOR] = celery_app
    return {d.name: _register(celery_app, runner, d) for d in app.external(EXECUTOR)}


def _register(celery_app: Celery, runner: HandoffRunner, d: TaskDef) -> Any:
    # ignore_result: the outcome is committed to trawl's database; no result backend needed.
    # acks_late with reject_on_worker_lost: a message is acknowledged once its attempt has
    # committed, so one its worker took and died with goes back to the queue. Had it
    # started, the copy runs nothing (its attempt is taken) and the job comes back when its
    # lease lapses, as a crashed attempt; had it not, it simply runs. With early acks, a
    # message taken and not yet started would be lost until the queue lease ran out.
    return celery_app.task(
        name=celery_name(d.name),
        queue=d.queue,
        ignore_result=True,
        acks_late=True,
        reject_on_worker_lost=True,
    )(_body(runner, d.name))


def _body(runner: HandoffRunner, task: str) -> Callable[[int, int], str]:
    def run(job_id: int, attempt: int) -> str:
        return runner.run(task, int(job_id), int(attempt))

    run.__name__ = run.__qualname__ = f"trawl_{task.replace('.', '_')}"
    return run
