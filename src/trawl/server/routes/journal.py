"""The journal: read from a cursor, follow it as Server-Sent Events, and consume it as a
named consumer whose position is stored (read, process, acknowledge)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, Request, delete, get, post
from litestar.params import Parameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.status_codes import HTTP_204_NO_CONTENT

from trawl.model.durations import seconds
from trawl.model.errors import InvalidInput, NotFound
from trawl.model.ids import check_id
from trawl.model.records import ConsumerRow, JournalEntry
from trawl.server import cursors
from trawl.server.stores import Stores
from trawl.server.wakeups import Wakeups
from trawl.store.store import Store

Limit = Annotated[int, Parameter(ge=1, le=cursors.MAX_LIMIT)]
PAGE = 500  # entries read at a time by the stream
KEEPALIVE = 15.0  # seconds: a comment line so proxies keep an idle stream open
_encoder = msgspec.json.Encoder()


class JournalPage(msgspec.Struct):
    entries: list[JournalEntry]
    next_after: int  # pass as ?after= for the next page (the last seq seen, or `after`)


class ConsumerList(msgspec.Struct):
    consumers: list[ConsumerRow]


class Ack(msgspec.Struct, forbid_unknown_fields=True):
    seq: cursors.Id  # the last entry processed: everything up to it is done


class Position(msgspec.Struct):
    consumer: str
    position: int


class Prune(msgspec.Struct, forbid_unknown_fields=True):
    """Drop entries older than *before* (seconds since the epoch, or a duration ago such as
    "30d"); refused while a consumer has not acknowledged them, unless *force*."""

    before: float | str
    force: bool = False


class Pruned(msgspec.Struct):
    deleted: int


def _name(name: str) -> str:
    return check_id(name, "consumer name")


def _before(value: float | str) -> float:
    if isinstance(value, str):
        return time.time() - seconds(value)
    return float(value)


class Journal(Controller):
    path = "/journal"
    tags = ("journal",)

    @get("/", opt={"scope": "read"})
    async def read(
        self,
        stores: Stores,
        after: Annotated[
            int, Parameter(ge=0, le=cursors.MAX_ID, description="The last seq already seen.")
        ] = 0,
        item: Annotated[str | None, Parameter(description="Only this item's entries.")] = None,
        limit: Limit = cursors.DEFAULT_LIMIT,
    ) -> JournalPage:
        """Entries after seq *after*, oldest first: every committed change."""

        def run(store: Store) -> list[JournalEntry]:
            if item is None:
                return store.journal(after, limit)
            with store.read():
                item_id = store.items.require(check_id(item))
                return store.listings.item_journal(item_id, after, limit)

        entries = await stores.run(run)
        return JournalPage(entries=entries, next_after=entries[-1].seq if entries else after)

    @get("/stream", opt={"scope": "read"}, media_type="text/event-stream")
    async def stream(
        self,
        request: Request[Any, Any, Any],
        stores: Stores,
        wakeups: Wakeups,
        after: Annotated[
            int, Parameter(ge=0, le=cursors.MAX_ID, description="The last seq already seen.")
        ] = 0,
    ) -> ServerSentEvent:
        """Server-Sent Events, one per entry (`id` is its seq, `event` its kind, `data` the
        entry as JSON), from *after* or the `Last-Event-ID` a reconnecting client sends.
        PostgreSQL wakes the stream as entries commit; on SQLite it looks every second."""
        last = request.headers.get("last-event-id")
        if last is not None:
            if not last.isdigit():
                raise InvalidInput(f"Last-Event-ID {last[:40]!r} is not a journal seq")
            after = int(last)
        return ServerSentEvent(_follow(stores, wakeups, after))

    @post("/prune", opt={"scope": "admin"}, status_code=200)
    async def prune(self, data: Prune, stores: Stores) -> Pruned:
        before = _before(data.before)
        deleted = await stores.run(lambda store: store.prune_journal(before, force=data.force))
        return Pruned(deleted=deleted)


def _page(after: int, store: Store) -> list[JournalEntry]:
    return store.journal(after, PAGE)


async def _follow(
    stores: Stores, wakeups: Wakeups, after: int
) -> AsyncIterator[ServerSentEventMessage]:
    cursor, quiet = after, 0.0
    while True:
        entries = await stores.run(partial(_page, cursor))
        for entry in entries:
            data = _encoder.encode(entry).decode()
            yield ServerSentEventMessage(data=data, id=entry.seq, event=entry.kind)
            cursor = entry.seq
        if len(entries) == PAGE:
            continue
        started = time.monotonic()
        await wakeups.wait(min(wakeups.poll, KEEPALIVE))
        quiet += time.monotonic() - started
        if quiet >= KEEPALIVE:
            quiet = 0.0
            yield ServerSentEventMessage(comment="keep-alive")


class Consumers(Controller):
    path = "/consumers"
    tags = ("journal",)

    @get("/", opt={"scope": "read"})
    async def list_consumers(self, stores: Stores) -> ConsumerList:
        """Each named consumer with its position (last acknowledged seq) and lag (entries
        after it)."""
        return ConsumerList(consumers=await stores.run(lambda store: store.consumers.list()))

    @get("/{name:str}/entries", opt={"scope": "read"})
    async def entries(
        self,
        name: str,
        stores: Stores,
        limit: Limit = cursors.DEFAULT_LIMIT,
        start: Literal["beginning", "end"] = "beginning",
    ) -> JournalPage:
        """The entries after the consumer's position (made at the journal's *start* the
        first time it is named). Reading does not move it: acknowledge what you processed."""
        checked = _name(name)

        def run(store: Store) -> tuple[int, list[JournalEntry]]:
            position = store.consumers.position(checked, store.clock(), start=start)
            return position, store.journal(position, limit)

        position, entries = await stores.run(run)
        return JournalPage(entries=entries, next_after=entries[-1].seq if entries else position)

    @post("/{name:str}/ack", opt={"scope": "write"}, status_code=200)
    async def ack(self, name: str, data: Ack, stores: Stores) -> Position:
        """Everything up to *seq* is processed: the consumer resumes after it. A position
        never moves back."""
        checked = _name(name)
        position = await stores.run(
            lambda store: store.consumers.ack(checked, data.seq, store.clock())
        )
        return Position(consumer=checked, position=position)

    @delete("/{name:str}", opt={"scope": "admin"}, status_code=HTTP_204_NO_CONTENT)
    async def remove(self, name: str, stores: Stores) -> None:
        """Forget a consumer (it no longer holds back pruning)."""
        checked = _name(name)
        if not await stores.run(lambda store: store.consumers.delete(checked)):
            raise NotFound(f"no consumer is named {checked!r}")
