"""Writes to items, aliases and tags, inside a transaction the caller holds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trawl.model import mergepatch
from trawl.model.errors import AliasError, ItemExists, ItemNotFound
from trawl.model.states import Journal
from trawl.store import codec
from trawl.store.connection import Database
from trawl.store.sql import (
    DESELECT_ORPHANED_JOBS,
    RESOLVE,
    SELECT_JOBS_FOR_TAG,
    q,
)

_INSERT_ITEM = q(
    "INSERT INTO items (id, data, created_by, created_at, updated_at) "
    "VALUES (:id, :data, :created_by, :now, :now) ON CONFLICT (id) DO NOTHING RETURNING id"
)
_INSERT_ALIAS = q(
    "INSERT INTO aliases (alias, item_id) VALUES (:alias, :item_id) "
    "ON CONFLICT (alias) DO NOTHING RETURNING alias"
)
_DELETE_ITEM = q("DELETE FROM items WHERE id = :id")
_ITEM_DATA = q("SELECT data FROM items WHERE id = :id")
_ITEM_DATA_LOCKED = q("SELECT data FROM items WHERE id = :id FOR UPDATE")
_SET_DATA = q("UPDATE items SET data = :data, updated_at = :now WHERE id = :id")
_UPSERT_TAG = q(
    "INSERT INTO tags (item_id, name, value) VALUES (:item_id, :name, :value) "
    "ON CONFLICT (item_id, name) DO UPDATE SET value = excluded.value"
)
_DELETE_TAG = q("DELETE FROM tags WHERE item_id = :item_id AND name = :name RETURNING name")
_ALIASES_OF = q("SELECT alias FROM aliases WHERE item_id = :id")
_REPOINT_ALIASES = q("UPDATE aliases SET item_id = :to WHERE item_id = :from_")
_DELETE_ALIAS = q("DELETE FROM aliases WHERE alias = :alias")
_RENAME = q("UPDATE items SET id = :to, updated_at = :now WHERE id = :from_")


class Items:
    """Item, alias and tag writes; every change also writes its journal row."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- lookups --------------------------------------------------------------------------

    def resolve(self, alias: str) -> str | None:
        return self.db.execute(RESOLVE, {"alias": alias}).scalar()

    def require(self, alias: str) -> str:
        item_id = self.resolve(alias)
        if item_id is None:
            raise ItemNotFound(f"no item has the id or alias {alias!r}")
        return item_id

    def data_for_update(self, item_id: str) -> dict[str, Any]:
        # FOR UPDATE on PostgreSQL so two commits cannot interleave a read-modify-write.
        stmt = _ITEM_DATA if self.db.is_sqlite else _ITEM_DATA_LOCKED
        text = self.db.execute(stmt, {"id": item_id}).scalar()
        if text is None:
            raise ItemNotFound(f"item {item_id!r} does not exist")
        data: dict[str, Any] = codec.loads(text)
        return data

    # -- writes ---------------------------------------------------------------------------

    def create(
        self,
        item_id: str,
        *,
        data: dict[str, Any],
        tags: Iterable[tuple[str, str | None]],
        now: float,
        created_by: str | None = None,
        fail_if_exists: bool = False,
        niceness: int | None = None,
        task: str | None = None,
    ) -> bool:
        """Create an item with its own id as alias; ``False`` if the id is taken."""
        creator = (self.resolve(created_by) or created_by) if created_by else None
        params = {"id": item_id, "data": codec.dumps(data), "created_by": creator, "now": now}
        created = self.db.execute(_INSERT_ITEM, params).scalar() is not None
        if created and self._claim_alias(item_id, item_id) is None:
            self.db.execute(_DELETE_ITEM, {"id": item_id})  # the id is another item's alias
            created = False
        if not created:
            if fail_if_exists:
                raise ItemExists(f"item {item_id!r} already exists")
            return False
        self.journal(Journal.ITEM_CREATED, now, item_id, task, {"created_by": creator})
        for name, value in tags:
            self.add_tag(item_id, name, value, now=now, niceness=niceness, task=task)
        return True

    def _claim_alias(self, alias: str, item_id: str) -> str | None:
        return self.db.execute(_INSERT_ALIAS, {"alias": alias, "item_id": item_id}).scalar()

    def set_data(
        self,
        item_id: str,
        data: dict[str, Any],
        now: float,
        task: str | None,
        *,
        old: dict[str, Any] | None = None,
    ) -> None:
        """Store *data* as the item's; with the *old* data, the journal entry carries the
        change as a merge patch (RFC 7396) so a consumer needs no second read."""
        self.db.execute(_SET_DATA, {"id": item_id, "data": codec.dumps(data), "now": now})
        detail = None if old is None else {"patch": mergepatch.diff(old, data)}
        self.journal(Journal.ITEM_UPDATED, now, item_id, task, detail)

    def add_tag(
        self,
        item_id: str,
        name: str,
        value: str | None,
        *,
        now: float,
        niceness: int | None = None,
        task: str | None = None,
    ) -> None:
        self.db.execute(_UPSERT_TAG, {"item_id": item_id, "name": name, "value": value})
        params = {"item_id": item_id, "tag": name, "now": now, "niceness": niceness}
        self.db.execute(SELECT_JOBS_FOR_TAG, params)
        self.journal(Journal.TAG_ADDED, now, item_id, task, {"tag": name, "value": value})

    def remove_tag(self, item_id: str, name: str, *, now: float, task: str | None) -> None:
        removed = self.db.execute(_DELETE_TAG, {"item_id": item_id, "name": name}).scalar()
        if removed is None:
            return
        self.db.execute(DESELECT_ORPHANED_JOBS, {"item_id": item_id, "tag": name})
        self.journal(Journal.TAG_REMOVED, now, item_id, task, {"tag": name})

    def create_alias(
        self, alias: str, to: str, *, now: float, task: str | None, fail_if_exists: bool
    ) -> bool:
        target = self.require(to)  # single level: an alias of an alias stores the final item
        if self._claim_alias(alias, target) is None:
            if fail_if_exists:
                raise ItemExists(f"alias {alias!r} already exists")
            return False
        self.journal(Journal.ALIAS_CREATED, now, target, task, {"alias": alias})
        return True

    def delete_alias(self, alias: str, *, now: float, task: str | None) -> None:
        target = self.resolve(alias)
        if target is None:
            return
        if target == alias:
            raise AliasError(
                f"{alias!r} is an item's own id, not an alias; delete or rename the item instead"
            )
        self.db.execute(_DELETE_ALIAS, {"alias": alias})
        self.journal(Journal.ALIAS_DELETED, now, target, task, {"alias": alias})

    def rename(self, from_: str, to: str, *, now: float, task: str | None) -> str:
        """Make *to* the item's primary id; every alias (the old id too) points at it."""
        item_id = self.require(from_)
        taken = self.resolve(to)
        if taken is not None and taken != item_id:
            raise ItemExists(f"cannot rename {item_id!r} to {to!r}: that id belongs to {taken!r}")
        if to == item_id:
            return item_id
        if taken is None:
            self._claim_alias(to, item_id)
        # ON UPDATE CASCADE carries jobs, tags and aliases to the new primary key.
        self.db.execute(_RENAME, {"from_": item_id, "to": to, "now": now})
        self.journal(Journal.ITEM_RENAMED, now, to, task, {"from": item_id})
        return to

    def aliases_of(self, item_id: str) -> list[str]:
        return list(self.db.execute(_ALIASES_OF, {"id": item_id}).scalars())

    def repoint_aliases(self, from_: str, to: str) -> None:
        self.db.execute(_REPOINT_ALIASES, {"from_": from_, "to": to})

    def delete(self, item_id: str, *, now: float, task: str | None) -> None:
        # Cascades remove its aliases, tags, jobs and their failures.
        self.db.execute(_DELETE_ITEM, {"id": item_id})
        self.journal(Journal.ITEM_DELETED, now, item_id, task, None)

    def journal(
        self, kind: Journal, now: float, item_id: str | None, task: str | None, detail: Any
    ) -> None:
        self.db.journal(
            [
                {
                    "at": now,
                    "kind": kind.value,
                    "item_id": item_id,
                    "task": task,
                    "detail": None if detail is None else codec.dumps(detail),
                }
            ]
        )
