"""What a task sees and asks for. Reads go to the database now; writes wait for the commit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from trawl.model import effects as fx
from trawl.model.durations import Duration, optional_seconds
from trawl.model.ids import check_id, check_tag
from trawl.model.records import ItemView
from trawl.store import codec
from trawl.store.store import Store

TagArg = str | tuple[str, str | None]
T = TypeVar("T")


class Reader(Protocol):
    """Reads a context may make while its task runs."""

    async def get_item(self, alias: str) -> ItemView | None: ...

    async def get_metadata(self, task: str, alias: str) -> dict[str, Any] | None: ...

    async def with_store(self, fn: Callable[[Store], T]) -> T: ...


@dataclass(slots=True)
class Asks:
    """What a task asked for during one attempt, besides its result: read by the worker
    when the attempt ends (see :func:`asks`), never by the task."""

    effects: list[fx.Effect] = field(default_factory=list)
    allow_failure: bool = False  # keep the effects even if the attempt then fails
    defer_until: float | None = None
    skip: bool = False
    eventful: bool | None = None  # None: judged by whether the result changed


def asks(ctx: Context) -> Asks:
    """The worker's side of *ctx*: what its task asked for. Not on Context itself, so a
    task's ``ctx.`` completions show only what a task may call."""
    return ctx._asks


class Context:
    """Handed to every task call: the item, and a buffer of what the task asks to change.

    Nothing a task asks for is written until the attempt commits, and then all of it is
    written together (or none of it, if the attempt fails and did not ``allow_failure()``).
    """

    def __init__(
        self,
        *,
        id: str,
        data: dict[str, Any],
        tags: Mapping[str, str | None],
        attempt: int,
        task: str,
        reader: Reader,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.id = id
        self.data = data
        self.tags = dict(tags)
        self.attempt = attempt
        self.task = task
        self._reader = reader
        self._loop = loop
        self._asks = Asks()

    # -- reads ----------------------------------------------------------------------------

    async def get_item(self, id: str) -> ItemView | None:
        """The item *id* resolves to (through aliases): canonical id, data, tags, aliases."""
        return await self._reader.get_item(check_id(id))

    async def get_metadata(self, task: str, id: str | None = None) -> dict[str, Any] | None:
        """The stored result of *task* for this item (or *id*), or ``None``."""
        return await self._reader.get_metadata(task, self._target(id))

    async def with_store(self, fn: Callable[[Store], T]) -> T:
        """Run ``fn(store)`` on the worker's database thread and return its result. For
        layers built on trawl that need a short transaction of their own while a task runs
        (the crawler's politeness gate); ordinary tasks never need it."""
        return await self._reader.with_store(fn)

    def get_item_sync(self, id: str) -> ItemView | None:
        """:meth:`get_item` for plain ``def`` tasks (they run in a thread)."""
        item: ItemView | None = self._block(self.get_item, id)
        return item

    def get_metadata_sync(self, task: str, id: str | None = None) -> dict[str, Any] | None:
        """:meth:`get_metadata` for plain ``def`` tasks."""
        meta: dict[str, Any] | None = self._block(self.get_metadata, task, id)
        return meta

    def _block(self, read: Callable[..., Any], *args: Any) -> Any:
        if self._loop is None:
            raise RuntimeError("no event loop to read through")
        return asyncio.run_coroutine_threadsafe(read(*args), self._loop).result()

    # -- buffered until commit ------------------------------------------------------------

    def create_item(
        self,
        id: str,
        tags: Iterable[TagArg] = (),
        data: dict[str, Any] | None = None,
        fail_if_exists: bool = False,
        created_by: str | None = None,
    ) -> None:
        """Create an item; ignored if the id exists unless *fail_if_exists*."""
        self._asks.effects.append(
            fx.CreateItem(
                id=check_id(id),
                tags=_tags(tags),
                data=_data(data or {}, "create_item data"),
                fail_if_exists=fail_if_exists,
                created_by=check_id(created_by, "created_by") if created_by else self.id,
            )
        )

    def rename_item(self, to: str, from_: str | None = None) -> None:
        """Make *to* the item's primary id; old ids keep resolving as aliases."""
        self._asks.effects.append(fx.RenameItem(to=check_id(to), from_=self._target(from_)))

    def merge_item(
        self,
        into: str,
        merge: fx.Merger,
        merge_metadata: Mapping[str, fx.Merger] | None = None,
        from_: str | None = None,
    ) -> None:
        """Merge this item (or *from_*) into *into*: ``merge(into_data, from_data)`` gives the
        new data; metadata merges per task, else the newest result wins; every alias of the
        merged item (its own id too) then points at *into*, and the merged item is deleted."""
        self._asks.effects.append(
            fx.MergeItem(
                into=check_id(into),
                from_=self._target(from_),
                merge=merge,
                merge_metadata=dict(merge_metadata or {}),
            )
        )

    def delete_item(self, id: str | None = None) -> None:
        self._asks.effects.append(fx.DeleteItem(id=self._target(id)))

    def create_alias(self, alias: str, to: str | None = None, fail_if_exists: bool = False) -> None:
        """Make *alias* resolve to *to* (or this item); ignored if taken unless told."""
        self._asks.effects.append(
            fx.CreateAlias(
                alias=check_id(alias, "alias"), to=self._target(to), fail_if_exists=fail_if_exists
            )
        )

    def delete_alias(self, alias: str) -> None:
        """Remove an alias (an item's own id cannot be removed this way)."""
        self._asks.effects.append(fx.DeleteAlias(alias=check_id(alias, "alias")))

    def update_data(self, fn: fx.Updater, id: str | None = None) -> None:
        """``fn(old_data) -> new_data``, run at commit against the data as it is then."""
        self._asks.effects.append(fx.UpdateData(id=self._target(id), fn=_callable(fn)))

    def update_metadata(
        self,
        fn: fx.Updater,
        task: str | None = None,
        id: str | None = None,
    ) -> None:
        """``fn(old_metadata) -> new``; *fn* gets ``{}`` when there is none. Another task's
        TTL is not reset by this."""
        self._asks.effects.append(
            fx.UpdateMetadata(id=self._target(id), task=task or self.task, fn=_callable(fn))
        )

    def expire(self, id: str | None = None, task: str | None = None) -> None:
        """Mark a result stale so the job is due again now."""
        self._asks.effects.append(fx.Expire(id=self._target(id), task=task or self.task))

    def set_ttl(
        self,
        ttl: Duration | None,
        id: str | None = None,
        task: str | None = None,
    ) -> None:
        """Override the TTL for one item's result, counted from that result's time."""
        self._asks.effects.append(
            fx.SetTTL(id=self._target(id), task=task or self.task, ttl=optional_seconds(ttl))
        )

    def add_tags(self, *tags: TagArg, id: str | None = None) -> None:
        self._asks.effects.append(fx.AddTags(id=self._target(id), tags=_tags(tags)))

    def remove_tags(self, *names: str, id: str | None = None) -> None:
        self._asks.effects.append(
            fx.RemoveTags(id=self._target(id), names=tuple(check_tag(n) for n in names))
        )

    def log(self, category: str, message: str) -> None:
        """A line in the journal, committed with the attempt."""
        self._asks.effects.append(
            fx.Log(id=self.id, task=self.task, category=str(category), message=str(message))
        )

    def eventful(self, changed: bool = True) -> None:
        """Say whether this run found a change (default: the returned metadata differs from
        the stored result). Adaptive revisits and dependents that re-run on change use it."""
        self._asks.eventful = bool(changed)

    def upsert_item(
        self,
        id: str,
        tags: Iterable[TagArg] = (),
        data: dict[str, Any] | None = None,
        last_update: float | None = None,
    ) -> None:
        """A lister's write: create the item, or merge *data* into it and add *tags*; either
        way it counts as listed now (``first_seen``/``last_seen``) with the source's
        ``last_update`` (seconds since the epoch), and jobs disabled as not found run again."""
        self._asks.effects.append(
            fx.UpsertItem(
                id=check_id(id),
                tags=_tags(tags),
                data=_data(data or {}, "upsert_item data"),
                last_update=None if last_update is None else float(last_update),
                created_by=self.id,
            )
        )

    def custom(self, effect: fx.CustomEffect[Store]) -> None:
        """Buffer an effect of your own: ``effect.apply(store, now, task)`` runs inside the
        commit transaction, in order with the others (the crawl layer records links so)."""
        self._asks.effects.append(fx.Custom(effect=effect))

    def defer(self, until: float) -> None:
        """End this attempt without a result: the job is due again at *until* (seconds since
        the epoch). Nothing else about the job changes: no failure, no retry used. Effects
        buffered so far are still applied."""
        self._asks.defer_until = float(until)

    def skip(self) -> None:
        """End this attempt as ``skipped``: not run, due never, until something external
        makes the job due again. Effects buffered so far are still applied."""
        self._asks.skip = True

    def allow_failure(self, allowed: bool = True) -> None:
        """Keep what this attempt asked for even if it then fails."""
        self._asks.allow_failure = bool(allowed)

    def _target(self, id: str | None) -> str:
        return self.id if id is None else check_id(id)


def _tags(tags: Iterable[TagArg]) -> tuple[fx.TagSpec, ...]:
    if isinstance(tags, str):
        tags = [tags]
    out = []
    for tag in tags:
        name, value = (tag, None) if isinstance(tag, str) else tag
        out.append(fx.TagSpec(name=check_tag(name), value=None if value is None else str(value)))
    return tuple(out)


def _data(value: Any, what: str) -> dict[str, Any]:
    obj = codec.object_or_error(value, what)
    codec.dumps(obj)
    return obj


def _callable(fn: Callable[..., Any]) -> Callable[..., Any]:
    if not callable(fn):
        raise TypeError(f"expected a function, got {type(fn).__name__}")
    return fn
