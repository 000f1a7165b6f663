"""Items: add in bulk, read (through any alias), list by tag, patch data, delete, and edit
several at once (rename, merge, aliases, tags) in one transaction."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import msgspec
from litestar import Controller, Request, delete, get, patch, post
from litestar.params import Parameter
from litestar.status_codes import HTTP_204_NO_CONTENT

from trawl.engine import edit
from trawl.model import effects as fx
from trawl.model import mergepatch
from trawl.model.errors import InvalidInput, ItemNotFound
from trawl.model.ids import check_id, check_json, check_tag
from trawl.model.itemjson import item_from_json, tags_from_json
from trawl.model.records import ItemView, NewItem
from trawl.server import cursors
from trawl.server.stores import Stores
from trawl.store.store import Store

MAX_ITEMS = 10_000  # per POST /items; larger sets go in several requests

TagsIn = list[str | list[str | None]] | dict[str, str | None]


class ItemIn(msgspec.Struct, forbid_unknown_fields=True):
    """An item as ``trawl add --file`` reads it from a line."""

    id: str
    tags: TagsIn | None = None
    data: dict[str, Any] | None = None
    niceness: cursors.Niceness | None = None


class AddItems(msgspec.Struct, forbid_unknown_fields=True):
    items: list[ItemIn]


class Added(msgspec.Struct):
    created: list[str]  # ids that were new
    existing: int  # items whose id was already in use, left as they were


class ItemIds(msgspec.Struct):
    items: list[str]
    next: str | None


# -- edits: each is one of the effects a task can ask for ----------------------------------


class Create(msgspec.Struct, tag="create", tag_field="op", forbid_unknown_fields=True):
    id: str
    tags: TagsIn | None = None
    data: dict[str, Any] | None = None
    fail_if_exists: bool = False


class Rename(msgspec.Struct, tag="rename", tag_field="op", forbid_unknown_fields=True):
    id: str
    to: str


class Merge(msgspec.Struct, tag="merge", tag_field="op", forbid_unknown_fields=True):
    """Merge item *source* into *into*; on keys both have, *prefer* says whose data wins."""

    into: str
    source: str
    prefer: Literal["into", "source"] = "into"


class Delete(msgspec.Struct, tag="delete", tag_field="op", forbid_unknown_fields=True):
    id: str


class AddAlias(msgspec.Struct, tag="add_alias", tag_field="op", forbid_unknown_fields=True):
    id: str
    alias: str
    fail_if_exists: bool = False


class RemoveAlias(msgspec.Struct, tag="remove_alias", tag_field="op", forbid_unknown_fields=True):
    alias: str


class AddTags(msgspec.Struct, tag="add_tags", tag_field="op", forbid_unknown_fields=True):
    id: str
    tags: TagsIn


class RemoveTags(msgspec.Struct, tag="remove_tags", tag_field="op", forbid_unknown_fields=True):
    id: str
    names: list[str]


class PatchData(msgspec.Struct, tag="patch_data", tag_field="op", forbid_unknown_fields=True):
    """An RFC 7396 merge patch of the item's data."""

    id: str
    patch: dict[str, Any]


class Expire(msgspec.Struct, tag="expire", tag_field="op", forbid_unknown_fields=True):
    id: str
    task: str


class SetTtl(msgspec.Struct, tag="set_ttl", tag_field="op", forbid_unknown_fields=True):
    id: str
    task: str
    ttl: float | None  # seconds; null: the task's own TTL again


Edit = (
    Create
    | Rename
    | Merge
    | Delete
    | AddAlias
    | RemoveAlias
    | AddTags
    | RemoveTags
    | PatchData
    | Expire
    | SetTtl
)


class Edits(msgspec.Struct, forbid_unknown_fields=True):
    edits: list[Edit]


class Applied(msgspec.Struct):
    applied: int


def _new_item(item: ItemIn) -> NewItem:
    fields = msgspec.structs.asdict(item)
    return item_from_json({k: v for k, v in fields.items() if v is not None})


def _effect(e: Edit) -> fx.Effect:
    match e:
        case Create():
            return fx.CreateItem(
                id=check_id(e.id),
                tags=_tags(e.tags),
                data=_data(e.data),
                fail_if_exists=e.fail_if_exists,
            )
        case Rename():
            return fx.RenameItem(to=check_id(e.to), from_=check_id(e.id))
        case Merge():
            return fx.MergeItem(
                into=check_id(e.into),
                from_=check_id(e.source),
                merge=_prefer_into if e.prefer == "into" else _prefer_source,
            )
        case Delete():
            return fx.DeleteItem(id=check_id(e.id))
        case AddAlias():
            return fx.CreateAlias(
                alias=check_id(e.alias, "alias"), to=check_id(e.id), fail_if_exists=e.fail_if_exists
            )
        case RemoveAlias():
            return fx.DeleteAlias(alias=check_id(e.alias, "alias"))
        case AddTags():
            return fx.AddTags(id=check_id(e.id), tags=_tags(e.tags))
        case RemoveTags():
            return fx.RemoveTags(id=check_id(e.id), names=tuple(check_tag(n) for n in e.names))
        case PatchData():
            check_json(e.patch, "the patch")
            return fx.UpdateData(id=check_id(e.id), fn=partial(mergepatch.apply, patch=e.patch))
        case Expire():
            return fx.Expire(id=check_id(e.id), task=e.task)
        case SetTtl():
            if e.ttl is not None and e.ttl < 0:
                raise InvalidInput(f"ttl must be 0 or more seconds, got {e.ttl}")
            return fx.SetTTL(id=check_id(e.id), task=e.task, ttl=e.ttl)


def _prefer_into(into: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    return {**source, **into}


def _prefer_source(into: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    return {**into, **source}


def _tags(value: TagsIn | None) -> tuple[fx.TagSpec, ...]:
    return tuple(fx.TagSpec(name=name, value=v) for name, v in tags_from_json(value))


def _data(value: dict[str, Any] | None) -> dict[str, Any]:
    check_json(value or {}, '"data"')
    return value or {}


def _item(store: Store, item_id: str) -> ItemView:
    view = store.get_item(check_id(item_id))
    if view is None:
        raise ItemNotFound(f"no item has the id or alias {item_id!r}")
    return view


def _check_tasks(store: Store, edits: list[Edit]) -> None:
    for e in edits:
        if isinstance(e, Expire | SetTtl):
            store.require_task(e.task)


class Items(Controller):
    path = "/items"
    tags = ("items",)

    @post("/", opt={"scope": "write"}, status_code=200)
    async def add(self, data: AddItems, stores: Stores) -> Added:
        """Add items in bulk (at most 10,000 a request), checked as `trawl add --file`
        checks a line. An id already in use is left as it is and counted in `existing`."""
        if len(data.items) > MAX_ITEMS:
            raise InvalidInput(
                f"{len(data.items)} items in one request; send at most {MAX_ITEMS} at a time"
            )
        new = []
        for n, item in enumerate(data.items):
            try:
                new.append(_new_item(item))
            except InvalidInput as error:
                raise InvalidInput(f"items[{n}]: {error}") from None
        created = await stores.run(lambda store: store.add_items(new, created_by="api"))
        return Added(created=created, existing=len(new) - len(created))

    @get("/", opt={"scope": "read"})
    async def tagged(
        self,
        stores: Stores,
        tag: Annotated[str, Parameter(description="List the items carrying this tag.")],
        cursor: str | None = None,
        limit: Annotated[int, Parameter(ge=1, le=cursors.MAX_LIMIT)] = cursors.DEFAULT_LIMIT,
    ) -> ItemIds:
        """Ids of the items carrying *tag*, in id order."""
        after = cursors.decode(cursor, str) or ""
        ids = await stores.run(lambda store: store.tagged(check_tag(tag), after=after, limit=limit))
        return ItemIds(items=ids, next=cursors.next_cursor(ids, limit, lambda i: i))

    @get("/{item_id:path}", opt={"scope": "read"})
    async def show(self, item_id: str, stores: Stores, request: Request[Any, Any, Any]) -> ItemView:
        """An item found through any of its ids or aliases (percent-encoded): data, tags,
        aliases, and each task's job with its result (metadata), expiry and version."""
        wanted = _path_id(request)
        return await stores.run(lambda store: _item(store, wanted))

    @patch("/{item_id:path}", opt={"scope": "write"})
    async def patch_data(
        self, item_id: str, data: dict[str, Any], stores: Stores, request: Request[Any, Any, Any]
    ) -> ItemView:
        """Change the item's data with an RFC 7396 merge patch (`null` removes a key)."""
        edit_ = PatchData(id=_path_id(request), patch=data)

        def run(store: Store) -> ItemView:
            _item(store, edit_.id)
            edit.apply(store, [_effect(edit_)], by="api")
            return _item(store, edit_.id)

        return await stores.run(run)

    @delete("/{item_id:path}", opt={"scope": "write"}, status_code=HTTP_204_NO_CONTENT)
    async def remove(self, item_id: str, stores: Stores, request: Request[Any, Any, Any]) -> None:
        """Delete the item with its jobs, results and aliases."""
        wanted = _path_id(request)

        def run(store: Store) -> None:
            found = _item(store, wanted)
            edit.apply(store, [fx.DeleteItem(id=found.id)], by="api")

        await stores.run(run)


class EditsController(Controller):
    path = "/edits"
    tags = ("items",)

    @post("/", opt={"scope": "write"}, status_code=200)
    async def apply(self, data: Edits, stores: Stores) -> Applied:
        """Apply edits in order, all or none, journaled like a task's: `create`, `rename`,
        `merge`, `delete`, `add_alias`, `remove_alias`, `add_tags`, `remove_tags`,
        `patch_data` (RFC 7396), `expire`, `set_ttl`."""
        if len(data.edits) > MAX_ITEMS:
            raise InvalidInput(f"{len(data.edits)} edits in one request; the most is {MAX_ITEMS}")
        effects = []
        for n, e in enumerate(data.edits):
            try:
                effects.append(_effect(e))
            except InvalidInput as error:
                raise InvalidInput(f"edits[{n}]: {error}") from None

        def run(store: Store) -> None:
            _check_tasks(store, data.edits)
            edit.apply(store, effects, by="api")

        await stores.run(run)
        return Applied(applied=len(effects))


def _path_id(request: Request[Any, Any, Any]) -> str:
    """The id as the client encoded it: from the raw path, since the decoded one has runs
    of slashes collapsed (ids are URLs: ``url:https://...``) and ``%2F`` already undone."""
    raw = request.scope.get("raw_path") or request.scope["path"].encode()
    prefix = b"/items/"
    encoded = raw.split(b"?", 1)[0]
    encoded = encoded[encoded.index(prefix) + len(prefix) :] if prefix in encoded else b""
    return unquote(encoded.decode("latin-1"), encoding="utf-8", errors="surrogateescape")
