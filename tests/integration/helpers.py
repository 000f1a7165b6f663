"""Small builders shared by the integration tests: a fake clock, tasks, claims, attempts."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import sqlalchemy as sa

from trawl.engine import backoff
from trawl.engine import claim as engine_claim
from trawl.engine.claim import TaskGate
from trawl.engine.commit import commit
from trawl.model import wire
from trawl.model.effects import Effect
from trawl.model.records import (
    AttemptResult,
    ClaimedJob,
    CommitReport,
    FailureInfo,
    JobView,
    NewItem,
    PipelineRow,
    TaskInfo,
)
from trawl.model.states import Outcome
from trawl.runtime.app import App
from trawl.runtime.context import Context
from trawl.runtime.settle import sweep_lapsed
from trawl.server.pipelines.routing import Routing
from trawl.store import codec
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

START = 1_700_000_000.0
SQL_LOG = logging.getLogger("trawl.sql")
LEASE = 60.0
BACKOFF = 10.0


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def task(
    name: str = "price",
    tags: Iterable[str] = ("product",),
    *,
    version: str = "1",
    ttl: float | None = None,
    retries: int = 3,
    niceness: int = 0,
) -> TaskInfo:
    return TaskInfo(
        name=name,
        version=version,
        tags=tuple(tags),
        ttl=ttl,
        timeout=LEASE,
        retries=retries,
        niceness=niceness,
    )


def item(item_id: str, *tags: str, niceness: int | None = None, **data: Any) -> NewItem:
    return NewItem(id=item_id, tags=tuple((t, None) for t in tags), data=data, niceness=niceness)


def claim(
    store: Store, *tasks: str, limit: int = 100, owner: str = "w1", lease: float = LEASE
) -> list[ClaimedJob]:
    """Claim as a worker does (engine.claim), for ungated tasks."""
    gates = [TaskGate(name=name, timeout=lease) for name in tasks or ("price",)]
    return engine_claim.claim(store, gates, limit, owner).jobs


def sweep_lost(store: Store, *tasks: str) -> list[AttemptResult]:
    """Settle lapsed leases as lost attempts, due again at once (a worker's sweep, with no
    backoff); returns the lost attempts."""
    app = App()
    for name in tasks or ("price",):
        app.task(name=name, retries=3, backoff=0)(lambda ctx: None)
    found, _ = sweep_lapsed(store, {name: app.get(name) for name in tasks or ("price",)})
    return found


def reclaim(store: Store, task_name: str = "price", owner: str = "w2") -> ClaimedJob:
    """After a lease lapsed: settle it as lost, then claim the job again."""
    assert sweep_lost(store, task_name), "expected a lapsed lease to settle"
    return claim_one(store, task_name, owner)


def claim_one(store: Store, task_name: str = "price", owner: str = "w1") -> ClaimedJob:
    jobs = claim(store, task_name, limit=1, owner=owner)
    assert len(jobs) == 1, f"expected one claimable {task_name} job, got {jobs}"
    return jobs[0]


def success(
    job: ClaimedJob,
    result: dict[str, Any] | None = None,
    *,
    version: str = "1",
    ttl: float | None = None,
    effects: tuple[Effect, ...] = (),
    retries: int = 3,
) -> AttemptResult:
    """A successful attempt; like a worker, it carries the delay to use should its effects
    fail at commit and turn it into a failure."""
    return AttemptResult(
        job_id=job.job_id,
        item_id=job.item_id,
        task=job.task,
        attempt=job.attempt,
        outcome=Outcome.SUCCESS,
        version=version,
        ttl=ttl,
        result=None if result is None else codec.dumps(result),
        effects=effects,
        retry_delay=backoff.delay(job.fail_count + 1, retries, BACKOFF),
    )


def failure(
    job: ClaimedJob,
    message: str = "boom",
    *,
    retries: int = 3,
    effects: tuple[Effect, ...] = (),
    allow: bool = False,
) -> AttemptResult:
    """A failed attempt, with the retry delay a worker would compute for it."""
    return AttemptResult(
        job_id=job.job_id,
        item_id=job.item_id,
        task=job.task,
        attempt=job.attempt,
        outcome=Outcome.FAILURE,
        version="1",
        ttl=None,
        failure=FailureInfo(error_type="RuntimeError", message=message, traceback="tb"),
        retry_delay=backoff.delay(job.fail_count + 1, retries, BACKOFF),
        effects=effects,
        apply_on_failure=allow,
    )


def commit_one(store: Store, result: AttemptResult) -> CommitReport:
    return commit(store, [result])


def job_of(store: Store, alias: str, task_name: str = "price") -> JobView:
    view = store.get_item(alias)
    assert view is not None, f"no item {alias!r}"
    jobs = [j for j in view.jobs if j.task == task_name]
    assert jobs, f"item {alias!r} has no {task_name} job"
    return jobs[0]


def due_at(store: Store, alias: str, task_name: str = "price") -> float:
    due = job_of(store, alias, task_name).due_at
    assert due is not None, f"the {task_name} job of {alias!r} is not due at all"
    return due


def data_of(store: Store, alias: str) -> dict[str, Any]:
    view = store.get_item(alias)
    assert view is not None, f"no item {alias!r}"
    return view.data


def claimed_ids(jobs: Iterable[ClaimedJob]) -> list[str]:
    return [j.item_id for j in jobs]


def journal_kinds(store: Store, since: int = 0) -> list[str]:
    return [e.kind for e in store.journal(since)]


def last_seq(store: Store) -> int:
    entries = store.journal()
    return entries[-1].seq if entries else 0


@contextmanager
def sql_statements() -> Iterator[list[str]]:
    """Every statement any store sends, in the order the server gets them: those SQLAlchemy
    runs and the hot-path ones trawl runs at the driver (logged on ``trawl.sql``)."""
    with _statements() as (texts, _):
        yield texts


@contextmanager
def sql_statements_by_thread() -> Iterator[list[tuple[str, str]]]:
    """As :func:`sql_statements`, each with the name of the thread that sent it (a worker's
    lanes send from threads of their own)."""
    with _statements() as (_, pairs):
        yield pairs


@contextmanager
def _statements() -> Iterator[tuple[list[str], list[tuple[str, str]]]]:
    texts: list[str] = []
    pairs: list[tuple[str, str]] = []

    def add(sql: str) -> None:  # both hooks run on the thread that sends the statement
        texts.append(sql)
        pairs.append((threading.current_thread().name, sql))

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            add(record.getMessage())

    def through_sqlalchemy(*args: Any) -> None:
        add(args[2])

    handler, level = Collect(logging.DEBUG), SQL_LOG.level
    SQL_LOG.addHandler(handler)
    SQL_LOG.setLevel(logging.DEBUG)
    sa.event.listen(sa.Engine, "before_cursor_execute", through_sqlalchemy)
    try:
        yield texts, pairs
    finally:
        sa.event.remove(sa.Engine, "before_cursor_execute", through_sqlalchemy)
        SQL_LOG.removeHandler(handler)
        SQL_LOG.setLevel(level)


@contextmanager
def database_user(
    pg_url: str,
    name: str,
    *,
    options: str = "",
    setup: Iterable[str] = (),
    undo: Iterable[str] = (),
) -> Iterator[str]:
    """A login role *name* on *pg_url*'s database (``CREATE ROLE name LOGIN options``) with
    every right on its tables and sequences but owning none; *setup* runs after the grants,
    *undo* before the role is dropped. Yields the URL that connects as it."""
    database = sa.make_url(pg_url).database
    role = f"{name}_{database}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN {options}")
        admin.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
        for statement in setup:
            admin.execute(statement.format(database=database))
    try:
        yield sa.make_url(pg_url).set(username=role).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            for statement in undo:
                admin.execute(statement.format(database=database))
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def product_app() -> App:
    """An app of one task, ``price``, for items tagged ``product``: 10 ms a job, no retry."""
    app = App()

    @app.task(tags=["product"], retries=0)
    async def price(ctx: Context) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {}

    return app


def fetch_routing(capabilities: list[str], slots: int = 4) -> Routing:
    """How a pipeline running only the fetch task, with *capabilities*, is routed."""
    hello = wire.Hello(
        v=wire.VERSION,
        protocol=wire.PROTOCOL,
        slots=slots,
        owner="h:1:x",
        tasks=[wire.TaskSpec(name=FETCH_TASK, version="1", timeout=60.0)],
        capabilities=capabilities,
    )
    row = PipelineRow(
        id="p",
        tags=(),
        match_only=False,
        slots=slots,
        created_at=0.0,
        token_rotated_at=0.0,
        draining=False,
        connected_at=None,
        server=None,
        last_checkin=None,
        client_version=None,
        in_use=0,
        disk_free=None,
        disk_total=None,
    )
    return Routing(hello, row)
