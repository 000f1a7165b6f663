"""Failures: list (newest first, filtered by task and item), show one with its traceback,
and retry or mark handled one, several, or all matching a filter."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get, post
from litestar.params import Parameter

from trawl.model.errors import NotFound
from trawl.model.ids import check_id
from trawl.model.records import FailureRecord
from trawl.server import auth, cursors
from trawl.server.stores import Stores
from trawl.store.store import Store


class FailureList(msgspec.Struct):
    failures: list[FailureRecord]
    next: str | None


class Which(msgspec.Struct, forbid_unknown_fields=True):
    """The failures to act on: these *ids*, or every one of *task* and/or *item*. With
    nothing at all, every failure (that needs the admin scope)."""

    ids: list[cursors.Id] | None = None
    task: str | None = None
    item: str | None = None


class Count(msgspec.Struct):
    count: int


def _which(store: Store, which: Which) -> tuple[str | None, str | None, list[int] | None]:
    if which.task is not None:
        store.require_task(which.task)
    item = check_id(which.item) if which.item is not None else None
    return which.task, item, which.ids


def _guard_all(request: Request[Any, Any, Any], which: Which) -> None:
    if which.ids is None and which.task is None and which.item is None:
        auth.require(request, "admin", "acting on every failure at once")


class Failures(Controller):
    path = "/failures"
    tags = ("failures",)

    @get("/", opt={"scope": "read"})
    async def list_failures(
        self,
        stores: Stores,
        task: str | None = None,
        item: str | None = None,
        handled: Annotated[
            bool, Parameter(description="Include failures already handled.")
        ] = False,
        cursor: str | None = None,
        limit: Annotated[int, Parameter(ge=1, le=cursors.MAX_LIMIT)] = cursors.DEFAULT_LIMIT,
    ) -> FailureList:
        """Failures, newest first; unhandled only unless `handled=true`."""
        before = cursors.decode(cursor, int)

        def run(store: Store) -> list[FailureRecord]:
            with store.read():
                task_, item_, _ = _which(store, Which(task=task, item=item))
                item_id = store.items.require(item_) if item_ is not None else None
                return store.listings.failures(
                    task=task_, item_id=item_id, include_handled=handled, before=before, limit=limit
                )

        rows = await stores.run(run)
        return FailureList(failures=rows, next=cursors.next_cursor(rows, limit, lambda r: r.id))

    @get("/{failure_id:int}", opt={"scope": "read"})
    async def show(self, failure_id: cursors.PathId, stores: Stores) -> FailureRecord:
        def run(store: Store) -> FailureRecord:
            with store.read():
                found = store.listings.failure(failure_id)
            if found is None:
                raise NotFound(f"no failure has the id {failure_id}")
            return found

        return await stores.run(run)

    @post("/retry", opt={"scope": "write"}, status_code=200)
    async def retry(self, data: Which, stores: Stores, request: Request[Any, Any, Any]) -> Count:
        """Make the failed jobs due now with a fresh failure count; their failures are
        marked handled."""
        _guard_all(request, data)

        def run(store: Store) -> int:
            task, item, ids = _which(store, data)
            return store.retry_failures(task=task, alias=item, ids=ids)

        return Count(count=await stores.run(run))

    @post("/handle", opt={"scope": "write"}, status_code=200)
    async def handle(self, data: Which, stores: Stores, request: Request[Any, Any, Any]) -> Count:
        """Mark failures handled (seen to) without running anything again."""
        _guard_all(request, data)

        def run(store: Store) -> int:
            task, item, ids = _which(store, data)
            return store.handle_failures(task=task, alias=item, ids=ids)

        return Count(count=await stores.run(run))
