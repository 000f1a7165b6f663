"""What a task asks of its context, buffered until the commit applies it atomically."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

JSONObject = dict[str, Any]
Merger = Callable[[JSONObject, JSONObject], JSONObject]
Updater = Callable[[JSONObject], JSONObject]
S_contra = TypeVar("S_contra", contravariant=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class TagSpec:
    """A tag to add: a name and an optional value."""

    name: str
    value: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CreateItem:
    id: str
    tags: tuple[TagSpec, ...] = ()
    data: JSONObject = field(default_factory=dict)
    fail_if_exists: bool = False
    created_by: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class UpsertItem:
    id: str
    tags: tuple[TagSpec, ...] = ()
    data: JSONObject = field(default_factory=dict)
    last_update: float | None = None
    created_by: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RenameItem:
    to: str
    from_: str


@dataclass(frozen=True, kw_only=True, slots=True)
class MergeItem:
    into: str
    from_: str
    merge: Merger
    merge_metadata: Mapping[str, Merger] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteItem:
    id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CreateAlias:
    alias: str
    to: str
    fail_if_exists: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteAlias:
    alias: str


@dataclass(frozen=True, kw_only=True, slots=True)
class UpdateData:
    id: str
    fn: Updater


@dataclass(frozen=True, kw_only=True, slots=True)
class UpdateMetadata:
    id: str
    task: str
    fn: Updater


@dataclass(frozen=True, kw_only=True, slots=True)
class Expire:
    id: str
    task: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SetTTL:
    id: str
    task: str
    ttl: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class AddTags:
    id: str
    tags: tuple[TagSpec, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class RemoveTags:
    id: str
    names: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Log:
    id: str
    task: str
    category: str
    message: str


class CustomEffect(Protocol[S_contra]):
    """An effect a layer above the engine defines (the crawl's link discoveries, say),
    applied to *S_contra*: the engine's ``Store`` (this layer knows nothing of it; the
    Context's ``custom`` asks for a ``CustomEffect[Store]``)."""

    def apply(self, store: S_contra, now: float, task: str) -> None:
        """Apply it inside the commit transaction; raising undoes the attempt's effects.

        It may also have a ``prepare()`` method, which the commit calls first, outside the
        transaction and before the attempt leaves its process (the crawl's fetch syncs its
        WARC records there: the commit then records offsets of durable records)."""


class BatchedEffect(CustomEffect[S_contra], Protocol[S_contra]):
    """A custom effect whose type can apply a run of its kind at once (fewer statements
    for a commit of many attempts). The commit calls ``type(effect).apply_many`` on the
    effects of consecutive attempts whose effects are all of one such type; the outcome
    must be that of ``apply`` on each in order. If it raises, each attempt's effects are
    applied again alone, under a savepoint of its own, so the failure costs only its
    attempt."""

    @classmethod
    def apply_many(cls, store: S_contra, now: float, task: str, effects: Sequence[Any]) -> None:
        """Apply *effects* (all of this type, in commit order) inside the transaction."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Custom:
    effect: CustomEffect[Any]


Effect = (
    CreateItem
    | UpsertItem
    | RenameItem
    | MergeItem
    | DeleteItem
    | CreateAlias
    | DeleteAlias
    | UpdateData
    | UpdateMetadata
    | Expire
    | SetTTL
    | AddTags
    | RemoveTags
    | Log
    | Custom
)
