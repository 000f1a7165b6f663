"""Items: find one by any of its ids or aliases, or list those carrying a tag; an item's
data, tags, aliases, each task's job with its metadata and freshness, and its journal."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from litestar import Request, Response
from litestar.params import Parameter
from litestar.response import Redirect

from trawl.model.errors import ItemNotFound
from trawl.model.ids import check_id, check_tag
from trawl.model.records import ItemView
from trawl.server import cursors
from trawl.server.dashboard.handlers import show, view
from trawl.server.stores import Stores
from trawl.store.store import Store

SHOWN = 50
Text = Annotated[str, Parameter(max_length=10_000)]


@view("/ui/items")
async def search(
    request: Request[Any, Any, Any],
    stores: Stores,
    q: Text = "",
    by: Literal["id", "tag"] = "id",
    after: Text = "",
) -> Response[Any]:
    """An id or alias goes straight to its item; a tag lists its items in id order."""
    wanted = q.strip()
    if not wanted:
        return show(request, "items.html", q="", by=by, ids=None, next=None, missing=False)
    if by == "id":
        found = await stores.run(lambda s: s.get_item(check_id(wanted)))
        if found is not None:
            return Redirect("/ui/item?" + urlencode({"id": found.id}), status_code=303)
        return show(request, "items.html", q=wanted, by=by, ids=None, next=None, missing=True)
    tag = check_tag(wanted)
    ids = await stores.run(lambda s: s.tagged(tag, after=after, limit=SHOWN))
    more = ids[-1] if len(ids) == SHOWN else None
    return show(request, "items.html", q=wanted, by=by, ids=ids, next=more, missing=not ids)


def _item(store: Store, wanted: str, after: int) -> dict[str, Any]:
    item: ItemView | None = store.get_item(check_id(wanted))
    if item is None:
        raise ItemNotFound(f"no item has the id or alias {wanted!r}")
    with store.read():
        journal = store.listings.item_journal(item.id, after, SHOWN)
    more = journal[-1].seq if len(journal) == SHOWN else None
    return {"item": item, "journal": journal, "next": more, "after": after}


@view("/ui/item")
async def item_page(
    request: Request[Any, Any, Any],
    stores: Stores,
    id: Annotated[str, Parameter(min_length=1, max_length=10_000)],
    after: Annotated[int, Parameter(ge=0, le=cursors.MAX_ID)] = 0,
) -> Response[str]:
    context = await stores.run(lambda s: _item(s, id, after))
    return show(request, "item.html", **context)


ROUTES = [search, item_page]
