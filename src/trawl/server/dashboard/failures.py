"""Failures grouped by task and error type; a group's failures, newest first; one failure's
traceback; and retry or handle of those ticked, through the store's own verbs."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response
from litestar.params import Parameter
from litestar.response import Redirect

from trawl.model.errors import InvalidInput, NotFound
from trawl.server import cursors
from trawl.server.dashboard.handlers import action, done, field, form, show, view, whole
from trawl.server.stores import Stores
from trawl.store.store import Store

GROUPS = 200
SHOWN = 50
Name = Annotated[str, Parameter(min_length=1, max_length=1000)]


@view("/ui/failures")
async def groups(request: Request[Any, Any, Any], stores: Stores) -> Response[str]:
    def run(store: Store) -> Any:
        with store.read():
            return store.listings.failure_groups(GROUPS)

    return show(request, "failures.html", groups=await stores.run(run))


@view("/ui/failures/group")
async def group(
    request: Request[Any, Any, Any],
    stores: Stores,
    task: Name,
    error_type: Name,
    before: Annotated[int | None, Parameter(ge=1, le=cursors.MAX_ID)] = None,
) -> Response[str]:
    def run(store: Store) -> Any:
        with store.read():
            return store.listings.failures(
                task=task,
                item_id=None,
                include_handled=False,
                before=before,
                limit=SHOWN,
                error_type=error_type,
            )

    rows = await stores.run(run)
    more = rows[-1].id if len(rows) == SHOWN else None
    return show(
        request, "failure_group.html", task=task, error_type=error_type, rows=rows, next=more
    )


@view("/ui/failures/{failure_id:int}")
async def one(
    request: Request[Any, Any, Any], stores: Stores, failure_id: cursors.PathId
) -> Response[str]:
    def run(store: Store) -> Any:
        with store.read():
            found = store.listings.failure(failure_id)
        if found is None:
            raise NotFound(f"no failure has the id {failure_id}")
        return found

    return show(request, "failure.html", failure=await stores.run(run))


def _back(text: str | None) -> str:
    """Return to the dashboard page the form was on (never elsewhere)."""
    if text and text.startswith("/ui/failures") and "//" not in text:
        return text
    return "/ui/failures"


@action("/ui/failures/act")
async def act(request: Request[Any, Any, Any], stores: Stores) -> Redirect:
    """Retry or handle the failures whose ids the form ticked."""
    fields = await form(request)
    what = field(fields, "do")
    if what not in ("retry", "handle"):
        raise InvalidInput(f"do must be 'retry' or 'handle', not {what!r}")
    ids = [whole(i, "a failure id", low=1, high=cursors.MAX_ID) for i in fields.get("ids", [])]
    if not ids:
        raise InvalidInput("tick at least one failure first")
    verb = Store.retry_failures if what == "retry" else Store.handle_failures
    count = await stores.run(lambda s: verb(s, ids=ids))
    said = "Retrying" if what == "retry" else "Handled"
    return done(_back(field(fields, "back", required=False)), f"{said} {count:,} of {len(ids):,}.")


ROUTES = [groups, group, one, act]
