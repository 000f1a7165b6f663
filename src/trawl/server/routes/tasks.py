"""Tasks: their counts, pause and resume, expiring results; what is due (the worklist, in
the order claims take it); and the rate limits with their state."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get, post
from litestar.params import Parameter

from trawl.model.errors import InvalidInput, UnknownTask
from trawl.model.ids import check_id, check_tag, check_text
from trawl.model.records import TaskCounts
from trawl.server import auth, cursors
from trawl.server.stores import Stores
from trawl.store.listings import DueJob
from trawl.store.scheduling import LimitRow
from trawl.store.store import Store

Limit = Annotated[int, Parameter(ge=1, le=cursors.MAX_LIMIT)]


class TaskList(msgspec.Struct):
    tasks: list[TaskCounts]


class Pause(msgspec.Struct, forbid_unknown_fields=True):
    reason: str | None = None


class ExpireBody(msgspec.Struct, forbid_unknown_fields=True):
    """Which results to make due now: all of the task's, those of items with *tag*, or one
    item's (by any of its ids)."""

    tag: str | None = None
    item: str | None = None


class Count(msgspec.Struct):
    count: int


class Paused(msgspec.Struct):
    task: str
    paused: bool


class Worklist(msgspec.Struct):
    jobs: list[DueJob]
    next: str | None


class Limits(msgspec.Struct):
    limits: list[LimitRow]


def _counts(store: Store, name: str) -> TaskCounts:
    for row in store.status():
        if row.task == name:
            return row
    raise UnknownTask(f"no task is named {name!r}")


class Tasks(Controller):
    path = "/tasks"
    tags = ("tasks",)

    @get("/", opt={"scope": "read"})
    async def list_tasks(self, stores: Stores) -> TaskList:
        """Every registered task with its version and job counts by status, as `trawl
        status` shows them."""
        return TaskList(tasks=await stores.run(lambda store: store.status()))

    @get("/{name:str}", opt={"scope": "read"})
    async def show(self, name: str, stores: Stores) -> TaskCounts:
        return await stores.run(lambda store: _counts(store, name))

    @post("/{name:str}/pause", opt={"scope": "admin"}, status_code=200)
    async def pause(self, name: str, data: Pause, stores: Stores) -> Paused:
        """Stop claims of the task's jobs (running ones finish) until resumed."""
        reason = check_text(data.reason, "reason") if data.reason else None
        await stores.run(lambda store: _pause(store, name, True, reason))
        return Paused(task=name, paused=True)

    @post("/{name:str}/resume", opt={"scope": "admin"}, status_code=200)
    async def resume(self, name: str, stores: Stores) -> Paused:
        await stores.run(lambda store: _pause(store, name, False, None))
        return Paused(task=name, paused=False)

    @post("/{name:str}/expire", opt={"scope": "write"}, status_code=200)
    async def expire(
        self, name: str, data: ExpireBody, stores: Stores, request: Request[Any, Any, Any]
    ) -> Count:
        """Make results due now; with neither *tag* nor *item* every result of the task
        (that needs the admin scope)."""
        if data.tag is not None and data.item is not None:
            raise InvalidInput("give 'tag' or 'item', not both")
        if data.tag is None and data.item is None:
            auth.require(request, "admin", "expiring every result of a task")
        tag = check_tag(data.tag) if data.tag is not None else None
        item = check_id(data.item) if data.item is not None else None
        count = await stores.run(lambda store: store.expire(name, tag=tag, alias=item))
        return Count(count=count)


def _pause(store: Store, name: str, paused: bool, reason: str | None) -> None:
    store.require_task(name)
    store.pause_task(name, paused=paused, reason=reason)


class Due(Controller):
    path = "/due"
    tags = ("tasks",)

    @get("/", opt={"scope": "read"})
    async def worklist(
        self,
        stores: Stores,
        task: str | None = None,
        tag: str | None = None,
        cursor: str | None = None,
        limit: Limit = cursors.DEFAULT_LIMIT,
    ) -> Worklist:
        """Jobs due now for *task* and/or items tagged *tag*, in the order claims take them
        (niceness, never-run first, oldest due first)."""
        if task is None and tag is None:
            raise InvalidInput("say which worklist: ?task=NAME, ?tag=NAME or both")
        after = cursors.decode(cursor, tuple[int, bool, float, int])
        checked_tag = check_tag(tag) if tag is not None else None

        def run(store: Store) -> list[DueJob]:
            if task is not None:
                store.require_task(task)
            with store.read():
                return store.listings.due(
                    store.clock(), task=task, tag=checked_tag, after=after, limit=limit
                )

        jobs = await stores.run(run)
        key = cursors.next_cursor(
            jobs, limit, lambda j: (j.niceness, j.ever_run, j.due_at, j.job_id)
        )
        return Worklist(jobs=jobs, next=key)


class LimitsController(Controller):
    path = "/limits"
    tags = ("tasks",)

    @get("/", opt={"scope": "read"})
    async def limits(self, stores: Stores) -> Limits:
        """Every rate limit: rate, burst, the tasks it covers, and how many keys are
        throttled and jobs waiting for a permit now."""
        return Limits(limits=await stores.run(lambda store: store.limits()))
