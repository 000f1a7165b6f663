"""Remote pipelines: create, list, change, drain, disconnect, rotate tokens, delete.

A change reaches the pipeline's session at once, on whichever server of the cluster holds
it (through the live registry); a session also re-reads its row every few seconds, so a
change made with the CLI reaches it too.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.params import Parameter

from trawl.model.records import PipelineRow
from trawl.server import cursors
from trawl.server.live import Live
from trawl.server.pipelines.notify import tell_pipeline
from trawl.server.stores import Stores
from trawl.store.pipelines import MAX_SLOTS, is_connected
from trawl.store.store import Store

Limit = Annotated[int, Parameter(ge=1, le=cursors.MAX_LIMIT)]
Slots = Annotated[int, msgspec.Meta(ge=1, le=MAX_SLOTS)]
Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class PipelineView(msgspec.Struct):
    id: str
    tags: list[str]
    match_only: bool
    slots: int
    connected: bool
    server: str | None
    in_use: int
    draining: bool
    client_version: str | None
    disk_free: int | None
    disk_total: int | None
    crawl: int | None  # pinned to this crawl's pages
    crawl_lock: str | None  # until it "finished", or "forever"
    crawl_slots: int | None  # how many of its slots are pinned (null: all)
    last_checkin: float | None
    connected_at: float | None
    created_at: float
    token_rotated_at: float


class PipelineList(msgspec.Struct):
    pipelines: list[PipelineView]
    next: str | None


class NewPipeline(msgspec.Struct, forbid_unknown_fields=True):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    tags: list[Tag] = []
    match_only: bool = False
    slots: Slots = 4


class Created(msgspec.Struct):
    """The pipeline's token: shown this once."""

    id: str
    token: str


class Change(msgspec.Struct, forbid_unknown_fields=True):
    add_tags: list[Tag] = []
    remove_tags: list[Tag] = []
    match_only: bool | None = None
    slots: Slots | None = None


class Pin(msgspec.Struct, forbid_unknown_fields=True):
    """Hold *slots* of the pipeline's slots (all: null) to the crawl's pages."""

    crawl: cursors.Id
    until: Literal["finished", "forever"] = "finished"
    slots: Slots | None = None


class Disconnected(msgspec.Struct):
    id: str
    was_connected: bool


def view(row: PipelineRow, now: float) -> PipelineView:
    return PipelineView(
        id=row.id,
        tags=list(row.tags),
        match_only=row.match_only,
        slots=row.slots,
        connected=is_connected(row, now),
        server=row.server,
        in_use=row.in_use,
        draining=row.draining,
        client_version=row.client_version,
        disk_free=row.disk_free,
        disk_total=row.disk_total,
        crawl=row.crawl,
        crawl_lock=row.crawl_lock,
        crawl_slots=row.crawl_slots,
        last_checkin=row.last_checkin,
        connected_at=row.connected_at,
        created_at=row.created_at,
        token_rotated_at=row.token_rotated_at,
    )


class Pipelines(Controller):
    path = "/pipelines"
    tags = ("pipelines",)

    @get("/", opt={"scope": "read"})
    async def list_pipelines(
        self, stores: Stores, cursor: str | None = None, limit: Limit = cursors.DEFAULT_LIMIT
    ) -> PipelineList:
        """Pipelines in id order: routing, slots, whether connected, slots in use, last
        check-in, client version, disk."""
        after = cursors.decode(cursor, str) or ""

        def run(store: Store) -> list[PipelineView]:
            now = store.clock()
            return [view(r, now) for r in store.pipelines.list(after=after, limit=limit)]

        rows = await stores.run(run)
        return PipelineList(pipelines=rows, next=cursors.next_cursor(rows, limit, lambda p: p.id))

    @post("/", opt={"scope": "admin"}, status_code=201)
    async def create(self, data: NewPipeline, stores: Stores) -> Created:
        """Make a pipeline; the answer holds its token, which is never shown again."""
        token = await stores.run(
            lambda store: store.pipelines.create(
                data.id,
                tags=data.tags,
                match_only=data.match_only,
                slots=data.slots,
                now=store.clock(),
            )
        )
        return Created(id=data.id, token=token)

    @get("/{pipeline_id:str}", opt={"scope": "read"})
    async def show(self, pipeline_id: str, stores: Stores) -> PipelineView:
        return await stores.run(
            lambda store: view(store.pipelines.require(pipeline_id), store.clock())
        )

    @patch("/{pipeline_id:str}", opt={"scope": "admin"})
    async def change(
        self, pipeline_id: str, data: Change, stores: Stores, live: Live
    ) -> PipelineView:
        """Add or remove routing tags, set match-only or slots; the session obeys at once."""

        def run(store: Store) -> PipelineView:
            row = store.pipelines.update(
                pipeline_id,
                add_tags=data.add_tags,
                remove_tags=data.remove_tags,
                match_only=data.match_only,
                slots=data.slots,
            )
            return view(row, store.clock())

        shown = await stores.run(run)
        await tell_pipeline(live, pipeline_id, "refresh", "changed")
        return shown

    @post("/{pipeline_id:str}/drain", opt={"scope": "write"}, status_code=200)
    async def drain(self, pipeline_id: str, stores: Stores, live: Live) -> PipelineView:
        """The pipeline finishes what it holds and claims nothing more until undrained."""
        return await _drain(pipeline_id, True, stores, live)

    @post("/{pipeline_id:str}/undrain", opt={"scope": "write"}, status_code=200)
    async def undrain(self, pipeline_id: str, stores: Stores, live: Live) -> PipelineView:
        return await _drain(pipeline_id, False, stores, live)

    @post("/{pipeline_id:str}/pin", opt={"scope": "write"}, status_code=200)
    async def pin(self, pipeline_id: str, data: Pin, stores: Stores, live: Live) -> PipelineView:
        """Fetch only this crawl's pages (whatever the tags say), until it finishes or
        until unpinned."""
        return await _pin(pipeline_id, data.crawl, data.until, stores, live, data.slots)

    @delete("/{pipeline_id:str}/pin", opt={"scope": "write"}, status_code=200)
    async def unpin(self, pipeline_id: str, stores: Stores, live: Live) -> PipelineView:
        return await _pin(pipeline_id, None, "finished", stores, live)

    @post("/{pipeline_id:str}/disconnect", opt={"scope": "write"}, status_code=200)
    async def disconnect(self, pipeline_id: str, stores: Stores, live: Live) -> Disconnected:
        """Close the pipeline's session (it may reconnect: to keep it out, rotate its token
        or delete it)."""
        await stores.run(lambda store: store.pipelines.require(pipeline_id))
        told = await tell_pipeline(live, pipeline_id, "disconnect", "an operator disconnected it")
        return Disconnected(id=pipeline_id, was_connected=told)

    @post("/{pipeline_id:str}/token", opt={"scope": "admin"}, status_code=200)
    async def rotate(self, pipeline_id: str, stores: Stores, live: Live) -> Created:
        """A new token; the old one stops working and an open session is closed."""
        token = await stores.run(lambda store: store.pipelines.rotate(pipeline_id, store.clock()))
        await tell_pipeline(live, pipeline_id, "refresh", "token rotated")
        return Created(id=pipeline_id, token=token)

    @delete("/{pipeline_id:str}", opt={"scope": "admin"}, status_code=204)
    async def remove(self, pipeline_id: str, stores: Stores, live: Live) -> None:
        """Delete the pipeline; an open session is closed and its token stops working."""
        await stores.run(lambda store: store.pipelines.require(pipeline_id))
        await stores.run(lambda store: store.pipelines.delete(pipeline_id))
        await tell_pipeline(live, pipeline_id, "refresh", "deleted")


async def _drain(pipeline_id: str, on: bool, stores: Stores, live: Live) -> PipelineView:
    def run(store: Store) -> PipelineView:
        return view(store.pipelines.update(pipeline_id, draining=on), store.clock())

    shown = await stores.run(run)
    await tell_pipeline(live, pipeline_id, "refresh", "drain" if on else "undrain")
    return shown


async def _pin(
    pipeline_id: str,
    crawl_id: int | None,
    lock: str,
    stores: Stores,
    live: Live,
    slots: int | None = None,
) -> PipelineView:
    def run(store: Store) -> PipelineView:
        return view(store.pipelines.pin(pipeline_id, crawl_id, lock, slots), store.clock())

    shown = await stores.run(run)
    await tell_pipeline(live, pipeline_id, "refresh", "pinned" if crawl_id else "unpinned")
    return shown
