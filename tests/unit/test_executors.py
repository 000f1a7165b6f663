"""Declaring tasks an external executor runs: the options are checked, and trawl's own
workers never run such a task."""

from __future__ import annotations

import pytest

import trawl
from trawl.model.errors import InvalidInput
from trawl.runtime.worker import Worker


def test_a_celery_task_gets_its_own_queue_by_default() -> None:
    app = trawl.App("sqlite:///unused.db")
    app.task(tags=["repo"], executor="celery")(lambda ctx: None)
    app.task(name="named", tags=["repo"], executor="celery", queue="loaders")(lambda ctx: None)
    assert (app.get("<lambda>").queue, app.get("named").queue) == ("trawl.<lambda>", "loaders")
    assert app.get("named").info().executor == "celery"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"executor": "rq"}, r"executor must be one of 'local', 'celery', got 'rq'"),
        ({"queue": "q"}, r"queue= is for tasks an external executor runs"),
        ({"executor": "celery", "queue": ""}, r"queue must be a non-empty name, got ''"),
        ({"executor": "celery", "queue": " q"}, r"queue must be a non-empty name"),
        ({"executor": "celery", "actor": trawl.Actor()}, r"actor= says how `trawl run`"),
    ],
)
def test_bad_executor_options_are_refused(options: dict[str, object], message: str) -> None:
    app = trawl.App("sqlite:///unused.db")
    with pytest.raises(InvalidInput, match=message):
        app.task(tags=["repo"], **options)(lambda ctx: None)  # type: ignore[call-overload]


def test_trawl_workers_never_run_celery_tasks() -> None:
    app = trawl.App("sqlite:///unused.db")
    app.task(name="load", tags=["repo"], executor="celery")(lambda ctx: None)
    app.task(name="parse", tags=["repo"])(lambda ctx: None)
    assert set(Worker(app).defs) == {"parse", "trawl.schedule"}
    with pytest.raises(InvalidInput, match=r"task 'load' runs on celery .*trawl feed celery"):
        Worker(app, tasks=["load"])


def test_the_orchestrator_starts_no_actor_for_celery_tasks() -> None:
    from trawl.runtime.orchestrator import Orchestrator

    app = trawl.App("sqlite:///unused.db")
    app.task(name="load", tags=["repo"], executor="celery")(lambda ctx: None)
    app.task(name="parse", tags=["repo"])(lambda ctx: None)
    assert set(Orchestrator(app, app_spec="x:app").actor_types) == {"parse", "trawl.schedule"}


def test_bind_wants_a_celery_app() -> None:
    from trawl.celery import bind

    with pytest.raises(InvalidInput, match=r"bind needs a celery\.Celery app, got str"):
        bind(trawl.App("sqlite:///unused.db"), "amqp://")  # type: ignore[arg-type]
