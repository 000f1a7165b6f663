"""An attempt as a pipeline sent it (trawl.model.wire) made into the AttemptResult the
engine commits, checked as a task's context checks what a local task asks for.

What crossed as data becomes an effect again: a merge patch becomes an ``update_data``
that applies it to the data as it is at commit, a merge's result a merge that returns it.
Custom effects are made only from names a layer registered (the crawler's outcomes);
nothing else a pipeline sends can run code on the server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import singledispatch
from typing import Any

import msgspec

from trawl.model import effects as fx
from trawl.model import mergepatch, wire
from trawl.model.errors import InvalidInput
from trawl.model.ids import check_id, check_json, check_tag, check_text
from trawl.model.records import AttemptResult, FailureInfo
from trawl.store import codec
from trawl.store.store import Store

# A custom effect's body, and the attempt it came with (to check it is about that attempt).
CustomDecoder = Callable[[Any, wire.Attempt], fx.CustomEffect[Store]]


class BadAttempt(InvalidInput):
    """Part of an attempt the server will not apply; ``field`` says where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def attempt_result(
    attempt: wire.Attempt, customs: Mapping[str, CustomDecoder], where: str
) -> AttemptResult:
    """*attempt* as the engine commits it; raises :class:`BadAttempt` naming the field."""
    effects: list[fx.Effect] = []
    for n, effect in enumerate(attempt.effects):
        field = f"{where}.effects[{n}]"
        try:
            effects.append(_effect(effect, customs, attempt))
        except (InvalidInput, ValueError, TypeError, msgspec.ValidationError) as error:
            raise BadAttempt(field, str(error)) from None
    if attempt.result is not None:
        _check_result(attempt.result, f"{where}.result")
    failure = attempt.failure
    return AttemptResult(
        job_id=attempt.job_id,
        item_id=attempt.item_id,
        task=attempt.task,
        attempt=attempt.attempt,
        outcome=attempt.outcome,
        version=attempt.version,
        ttl=attempt.ttl,
        result=attempt.result,
        effects=tuple(effects),
        failure=None
        if failure is None
        else FailureInfo(
            error_type=check_text(failure.error_type, f"{where}.failure.error_type"),
            message=failure.message.replace("\x00", "\\x00"),
            traceback=failure.traceback.replace("\x00", "\\x00"),
        ),
        retry_delay=attempt.retry_delay,
        apply_on_failure=attempt.apply_on_failure,
        result_hash=attempt.result_hash,
        revisit_offset=attempt.revisit_offset,
        not_found=attempt.not_found,
        changed=attempt.changed,
        defer_until=attempt.defer_until,
    )


def _check_result(text: str, field: str) -> None:
    try:
        value = codec.loads(text)
    except Exception:
        raise BadAttempt(field, "is not JSON text") from None
    if not isinstance(value, dict):
        raise BadAttempt(field, f"is JSON {type(value).__name__}: a result must be an object")
    check_json(value, field)


def _tags(pairs: list[tuple[str, str | None]]) -> tuple[fx.TagSpec, ...]:
    return tuple(
        fx.TagSpec(name=check_tag(name), value=None if value is None else check_text(value, "tag"))
        for name, value in pairs
    )


def _data(value: dict[str, Any], what: str) -> dict[str, Any]:
    check_json(value, what)
    return value


def _effect(
    effect: wire.WireEffect, customs: Mapping[str, CustomDecoder], attempt: wire.Attempt
) -> fx.Effect:
    if isinstance(effect, wire.Custom):
        decoder = customs.get(effect.name)
        if decoder is None:
            known = ", ".join(sorted(customs)) or "none"
            raise InvalidInput(f"no custom effect is named {effect.name!r} (known: {known})")
        return fx.Custom(effect=decoder(effect.body, attempt))
    return _plain(effect)


@singledispatch
def _plain(effect: Any) -> fx.Effect:
    raise InvalidInput(f"unknown effect {type(effect).__name__}")


@_plain.register
def _(e: wire.CreateItem) -> fx.Effect:
    return fx.CreateItem(
        id=check_id(e.id),
        tags=_tags(e.tags),
        data=_data(e.data, "data"),
        fail_if_exists=e.fail_if_exists,
        created_by=check_id(e.created_by, "created_by") if e.created_by else None,
    )


@_plain.register
def _(e: wire.UpsertItem) -> fx.Effect:
    return fx.UpsertItem(
        id=check_id(e.id),
        tags=_tags(e.tags),
        data=_data(e.data, "data"),
        last_update=e.last_update,
        created_by=check_id(e.created_by, "created_by") if e.created_by else None,
    )


@_plain.register
def _(e: wire.RenameItem) -> fx.Effect:
    return fx.RenameItem(to=check_id(e.to), from_=check_id(e.from_))


@_plain.register
def _(e: wire.MergeItem) -> fx.Effect:
    data = _data(e.data, "data")
    merged = {task: _data(meta, f"metadata[{task!r}]") for task, meta in e.metadata.items()}
    return fx.MergeItem(
        into=check_id(e.into),
        from_=check_id(e.from_),
        merge=lambda into, from_: dict(data),
        merge_metadata={task: _constant(meta) for task, meta in merged.items()},
    )


def _constant(value: dict[str, Any]) -> fx.Merger:
    return lambda ours, theirs: dict(value)


@_plain.register
def _(e: wire.DeleteItem) -> fx.Effect:
    return fx.DeleteItem(id=check_id(e.id))


@_plain.register
def _(e: wire.CreateAlias) -> fx.Effect:
    return fx.CreateAlias(
        alias=check_id(e.alias, "alias"), to=check_id(e.to), fail_if_exists=e.fail_if_exists
    )


@_plain.register
def _(e: wire.DeleteAlias) -> fx.Effect:
    return fx.DeleteAlias(alias=check_id(e.alias, "alias"))


@_plain.register
def _(e: wire.PatchData) -> fx.Effect:
    patch = _data(e.patch, "patch")
    return fx.UpdateData(id=check_id(e.id), fn=lambda old: mergepatch.apply(old, patch))


@_plain.register
def _(e: wire.PatchMetadata) -> fx.Effect:
    patch = _data(e.patch, "patch")
    return fx.UpdateMetadata(
        id=check_id(e.id), task=e.task, fn=lambda old: mergepatch.apply(old, patch)
    )


@_plain.register
def _(e: wire.Expire) -> fx.Effect:
    return fx.Expire(id=check_id(e.id), task=e.task)


@_plain.register
def _(e: wire.SetTTL) -> fx.Effect:
    return fx.SetTTL(id=check_id(e.id), task=e.task, ttl=e.ttl)


@_plain.register
def _(e: wire.AddTags) -> fx.Effect:
    return fx.AddTags(id=check_id(e.id), tags=_tags(e.tags))


@_plain.register
def _(e: wire.RemoveTags) -> fx.Effect:
    return fx.RemoveTags(id=check_id(e.id), names=tuple(check_tag(n) for n in e.names))


@_plain.register
def _(e: wire.Log) -> fx.Effect:
    return fx.Log(
        id=check_id(e.id),
        task=e.task,
        category=check_text(e.category, "category"),
        message=e.message.replace("\x00", "\\x00"),
    )
