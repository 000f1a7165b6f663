"""Applying what a task buffered in its context, inside the commit transaction."""

from __future__ import annotations

import copy
from functools import singledispatchmethod
from typing import Any

from trawl.engine.usercode import bounded
from trawl.model import effects as fx
from trawl.model.errors import ItemExists
from trawl.model.states import Journal
from trawl.store import codec
from trawl.store.store import Store


class EffectApplier:
    """Applies one attempt's effects in order; any error undoes them all (a savepoint)."""

    def __init__(self, store: Store, *, now: float, task: str) -> None:
        self.store = store
        self.items = store.items
        self.results = store.results
        self.now = now
        self.task = task

    def apply_all(self, effects: tuple[fx.Effect, ...]) -> None:
        for effect in effects:
            self.apply(effect)

    @singledispatchmethod
    def apply(self, effect: Any) -> None:
        raise TypeError(f"unknown effect {effect!r}")

    @apply.register
    def _(self, e: fx.CreateItem) -> None:
        self.items.create(
            e.id,
            data=e.data,
            tags=[(t.name, t.value) for t in e.tags],
            now=self.now,
            created_by=e.created_by,
            fail_if_exists=e.fail_if_exists,
            task=self.task,
        )

    @apply.register
    def _(self, e: fx.UpsertItem) -> None:
        tags = [(t.name, t.value) for t in e.tags]
        item_id = self.items.resolve(e.id)
        if item_id is None:
            self.items.create(
                e.id,
                data=e.data,
                tags=tags,
                now=self.now,
                created_by=e.created_by,
                task=self.task,
            )
            item_id = e.id
        else:
            if e.data:
                old = self.items.data_for_update(item_id)
                self.items.set_data(item_id, old | e.data, self.now, self.task, old=old)
            for name, value in tags:
                self.items.add_tag(item_id, name, value, now=self.now, task=self.task)
        self.store.relist(item_id, self.now, e.last_update)

    @apply.register
    def _(self, e: fx.RenameItem) -> None:
        self.items.rename(e.from_, e.to, now=self.now, task=self.task)

    @apply.register
    def _(self, e: fx.MergeItem) -> None:
        into, from_ = self.items.require(e.into), self.items.require(e.from_)
        if into == from_:
            raise ItemExists(f"cannot merge {e.from_!r} into {e.into!r}: they are the same item")
        old = (self.items.data_for_update(into), self.items.data_for_update(from_))
        # copies: the user's function may change what it is given, and the journal's patch
        # is taken against the data as it was
        merged = bounded("a merge_item merge function", e.merge, *copy.deepcopy(old))
        merged = _object(merged, "merge result")
        self.items.set_data(into, merged, self.now, self.task, old=old[0])
        self._merge_metadata(into, from_, e)
        self._merge_tags(into, from_)
        self.items.repoint_aliases(from_, into)  # from_'s own id too: it becomes a redirect
        self.items.delete(from_, now=self.now, task=self.task)
        self.items.journal(Journal.ITEM_MERGED, self.now, into, self.task, {"from": from_})

    def _merge_metadata(self, into: str, from_: str, e: fx.MergeItem) -> None:
        theirs, ours = self.results.all_of(from_), self.results.all_of(into)
        for task, row in theirs.items():
            mine = ours.get(task)
            merger = e.merge_metadata.get(task)
            if merger is not None:
                old = codec.loads(mine["result"]) if mine and mine["result"] else {}
                new = bounded("a merge_metadata function", merger, old, codec.loads(row["result"]))
                row = (mine or row) | {"result": codec.dumps(_object(new, "metadata merge"))}
            elif mine is not None and (mine["result_at"] or 0) >= (row["result_at"] or 0):
                continue  # no merger: the newest result wins
            self.results.put(into, task, row)

    def _merge_tags(self, into: str, from_: str) -> None:
        view = self.store.get_item(from_)
        have = self.store.get_item(into)
        assert view is not None
        assert have is not None
        for name, value in view.tags.items():
            if name not in have.tags:
                self.items.add_tag(into, name, value, now=self.now, task=self.task)

    @apply.register
    def _(self, e: fx.DeleteItem) -> None:
        item_id = self.items.resolve(e.id)
        if item_id is not None:
            self.items.delete(item_id, now=self.now, task=self.task)

    @apply.register
    def _(self, e: fx.CreateAlias) -> None:
        self.items.create_alias(
            e.alias, e.to, now=self.now, task=self.task, fail_if_exists=e.fail_if_exists
        )

    @apply.register
    def _(self, e: fx.DeleteAlias) -> None:
        self.items.delete_alias(e.alias, now=self.now, task=self.task)

    @apply.register
    def _(self, e: fx.UpdateData) -> None:
        item_id = self.items.require(e.id)
        old = self.items.data_for_update(item_id)
        new = bounded("an update_data function", e.fn, copy.deepcopy(old))
        self.items.set_data(
            item_id, _object(new, "update_data result"), self.now, self.task, old=old
        )

    @apply.register
    def _(self, e: fx.UpdateMetadata) -> None:
        item_id = self.items.require(e.id)
        self._known_task(e.task)
        row = self.results.get(item_id, e.task)
        old = codec.loads(row["result"]) if row and row["result"] else {}
        updated = bounded("an update_metadata function", e.fn, old)
        new = codec.dumps(_object(updated, "update_metadata result"))
        if row is None:
            self.results.put(
                item_id,
                e.task,
                {
                    "result": new,
                    "result_version": None,
                    "result_at": None,  # no run made it
                    "expires_at": None,
                    "succeeded": None,
                    "ever_run": False,
                },
            )
        else:
            self.results.set_metadata(item_id, e.task, new)  # its TTL is left as it was
        self.items.journal(Journal.METADATA_UPDATED, self.now, item_id, e.task, None)

    @apply.register
    def _(self, e: fx.Expire) -> None:
        item_id = self.items.require(e.id)
        self._known_task(e.task)
        self.results.expire(item_id, e.task, self.now)
        self.items.journal(Journal.JOB_EXPIRED, self.now, item_id, e.task, {"by": self.task})

    @apply.register
    def _(self, e: fx.SetTTL) -> None:
        item_id = self.items.require(e.id)
        self._known_task(e.task)
        self.results.set_ttl(item_id, e.task, e.ttl, self.now)
        self.items.journal(Journal.JOB_TTL, self.now, item_id, e.task, {"ttl": e.ttl})

    @apply.register
    def _(self, e: fx.AddTags) -> None:
        item_id = self.items.require(e.id)
        for tag in e.tags:
            self.items.add_tag(item_id, tag.name, tag.value, now=self.now, task=self.task)

    @apply.register
    def _(self, e: fx.RemoveTags) -> None:
        item_id = self.items.require(e.id)
        for name in e.names:
            self.items.remove_tag(item_id, name, now=self.now, task=self.task)

    @apply.register
    def _(self, e: fx.Log) -> None:
        detail = {"category": e.category, "message": e.message}
        self.items.journal(Journal.LOG, self.now, self.items.resolve(e.id) or e.id, e.task, detail)

    @apply.register
    def _(self, e: fx.Custom) -> None:
        e.effect.apply(self.store, self.now, self.task)

    def _known_task(self, task: str) -> None:
        if task != self.task:
            self.store.require_task(task)


def _object(value: Any, what: str) -> dict[str, Any]:
    obj = codec.object_or_error(value, what)
    codec.dumps(obj)  # fail here, with the callback named, rather than deep in the driver
    return obj
