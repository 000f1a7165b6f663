"""An attempt's effects as data for the wire (trawl.model.wire).

Most effects are data already. The ones that carry a callback are run here, on the
pipeline, when the attempt ends, against what the pipeline reads through the server, and
sent as what they did: ``update_data(fn)`` as an RFC 7396 merge patch of the data (applied
at commit to the data as it is then, so a change to other keys meanwhile is kept), and
``merge_item(merge=...)`` as the merged data. Custom effects cross only if they say how
(a ``wire()`` method giving a name the server knows: the crawler's outcomes).
"""

from __future__ import annotations

import copy
from functools import singledispatchmethod
from typing import Any, Protocol

from trawl.model import effects as fx
from trawl.model import mergepatch, wire
from trawl.model.records import AttemptResult
from trawl.runtime.context import Reader


class NotRemotable(Exception):
    """An effect that cannot be sent to the server (a custom effect that has no wire form)."""


class Wired(Protocol):
    def wire(self) -> tuple[str, Any]:
        """The effect's name on the wire and its body (plain data)."""


def _tags(tags: tuple[fx.TagSpec, ...]) -> list[tuple[str, str | None]]:
    return [(t.name, t.value) for t in tags]


class Translation:
    """Turns one attempt's effects into wire effects, in order, keeping a view of the data
    each callback saw so a later one sees what an earlier one did."""

    def __init__(self, item_id: str, data: dict[str, Any] | None, reader: Reader) -> None:
        """*data*: the attempt's item's data as claimed (None: read it if needed)."""
        self.reader = reader
        self.views: dict[str, dict[str, Any]] = {} if data is None else {item_id: data}

    async def all(self, effects: tuple[fx.Effect, ...]) -> list[wire.WireEffect]:
        out: list[wire.WireEffect] = []
        for effect in effects:
            translated = await self.one(effect)
            if translated is not None:
                out.append(translated)
        return out

    async def view(self, item_id: str) -> dict[str, Any]:
        if item_id not in self.views:
            item = await self.reader.get_item(item_id)
            self.views[item_id] = copy.deepcopy(item.data) if item is not None else {}
        return self.views[item_id]

    async def metadata(self, task: str, item_id: str) -> dict[str, Any] | None:
        return await self.reader.get_metadata(task, item_id)

    @singledispatchmethod
    async def one(self, effect: Any) -> wire.WireEffect | None:
        raise NotRemotable(f"{type(effect).__name__} cannot be sent to the server")

    @one.register
    async def _(self, e: fx.CreateItem) -> wire.WireEffect | None:
        self.views.setdefault(e.id, copy.deepcopy(e.data))
        return wire.CreateItem(
            id=e.id,
            tags=_tags(e.tags),
            data=e.data,
            fail_if_exists=e.fail_if_exists,
            created_by=e.created_by,
        )

    @one.register
    async def _(self, e: fx.UpsertItem) -> wire.WireEffect | None:
        self.views.pop(e.id, None)  # merged with what is stored: read again if needed
        return wire.UpsertItem(
            id=e.id,
            tags=_tags(e.tags),
            data=e.data,
            last_update=e.last_update,
            created_by=e.created_by,
        )

    @one.register
    async def _(self, e: fx.RenameItem) -> wire.WireEffect | None:
        if e.from_ in self.views:
            self.views[e.to] = self.views.pop(e.from_)
        return wire.RenameItem(to=e.to, from_=e.from_)

    @one.register
    async def _(self, e: fx.MergeItem) -> wire.WireEffect | None:
        into, from_ = await self.view(e.into), await self.view(e.from_)
        data = e.merge(copy.deepcopy(into), copy.deepcopy(from_))
        metadata: dict[str, dict[str, Any]] = {}
        for task, merger in e.merge_metadata.items():
            theirs = await self.metadata(task, e.from_)
            if theirs is not None:
                metadata[task] = merger(await self.metadata(task, e.into) or {}, theirs)
        self.views[e.into] = copy.deepcopy(data)
        self.views.pop(e.from_, None)
        return wire.MergeItem(into=e.into, from_=e.from_, data=data, metadata=metadata)

    @one.register
    async def _(self, e: fx.UpdateData) -> wire.WireEffect | None:
        before = await self.view(e.id)
        after = e.fn(copy.deepcopy(before))
        if not isinstance(after, dict):
            raise NotRemotable(
                f"update_data's function returned {type(after).__name__}, not a dict"
            )
        patch = mergepatch.diff(before, after)
        self.views[e.id] = after
        return wire.PatchData(id=e.id, patch=patch) if patch else None

    @one.register
    async def _(self, e: fx.UpdateMetadata) -> wire.WireEffect | None:
        before = await self.metadata(e.task, e.id) or {}
        after = e.fn(copy.deepcopy(before))
        if not isinstance(after, dict):
            raise NotRemotable(
                f"update_metadata's function returned {type(after).__name__}, not a dict"
            )
        patch = mergepatch.diff(before, after)
        return wire.PatchMetadata(id=e.id, task=e.task, patch=patch) if patch else None

    @one.register
    async def _(self, e: fx.DeleteItem) -> wire.WireEffect | None:
        self.views.pop(e.id, None)
        return wire.DeleteItem(id=e.id)

    @one.register
    async def _(self, e: fx.CreateAlias) -> wire.WireEffect | None:
        return wire.CreateAlias(alias=e.alias, to=e.to, fail_if_exists=e.fail_if_exists)

    @one.register
    async def _(self, e: fx.DeleteAlias) -> wire.WireEffect | None:
        return wire.DeleteAlias(alias=e.alias)

    @one.register
    async def _(self, e: fx.Expire) -> wire.WireEffect | None:
        return wire.Expire(id=e.id, task=e.task)

    @one.register
    async def _(self, e: fx.SetTTL) -> wire.WireEffect | None:
        return wire.SetTTL(id=e.id, task=e.task, ttl=e.ttl)

    @one.register
    async def _(self, e: fx.AddTags) -> wire.WireEffect | None:
        return wire.AddTags(id=e.id, tags=_tags(e.tags))

    @one.register
    async def _(self, e: fx.RemoveTags) -> wire.WireEffect | None:
        return wire.RemoveTags(id=e.id, names=list(e.names))

    @one.register
    async def _(self, e: fx.Log) -> wire.WireEffect | None:
        return wire.Log(id=e.id, task=e.task, category=e.category, message=e.message)

    @one.register
    async def _(self, e: fx.Custom) -> wire.WireEffect | None:
        to_wire = getattr(e.effect, "wire", None)
        if to_wire is None:
            raise NotRemotable(
                f"custom effect {type(e.effect).__name__} has no wire form: a task that uses "
                "ctx.custom() runs only on workers with the database (trawl worker --db)"
            )
        name, body = to_wire()
        return wire.Custom(name=name, body=body)


def attempt(result: AttemptResult, effects: list[wire.WireEffect]) -> wire.Attempt:
    """*result* as the wire says it, with its effects already translated."""
    failure = result.failure
    return wire.Attempt(
        job_id=result.job_id,
        item_id=result.item_id,
        task=result.task,
        attempt=result.attempt,
        outcome=result.outcome,
        version=result.version,
        ttl=result.ttl,
        result=result.result,
        effects=effects,
        failure=None
        if failure is None
        else wire.Failure(
            error_type=failure.error_type, message=failure.message, traceback=failure.traceback
        ),
        retry_delay=result.retry_delay,
        apply_on_failure=result.apply_on_failure,
        result_hash=result.result_hash,
        revisit_offset=result.revisit_offset,
        not_found=result.not_found,
        changed=result.changed,
        defer_until=result.defer_until,
    )
