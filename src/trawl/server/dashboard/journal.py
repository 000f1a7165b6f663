"""The journal: the newest entries, filtered by kind, task or item, then a live tail."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Request, Response
from litestar.params import Parameter

from trawl.model.ids import check_id
from trawl.model.records import JournalEntry
from trawl.server.dashboard.handlers import show, view
from trawl.server.stores import Stores
from trawl.store.store import Store

SHOWN = 100
WINDOW = 100_000  # entries looked back through for a filter: a rare one stays cheap
Filter = Annotated[str, Parameter(max_length=1000)]


@dataclass(frozen=True, kw_only=True, slots=True)
class Filters:
    kind: str | None = None
    task: str | None = None
    item: str | None = None  # an item's id as the journal has it (its primary id)

    def keep(self, entry: JournalEntry) -> bool:
        return (
            (self.kind is None or entry.kind == self.kind)
            and (self.task is None or entry.task == self.task)
            and (self.item is None or entry.item_id == self.item)
        )

    def query(self) -> dict[str, str]:
        pairs = {"kind": self.kind, "task": self.task, "item": self.item}
        return {k: v for k, v in pairs.items() if v is not None}


def filters(kind: str, task: str, item: str) -> Filters:
    return Filters(
        kind=kind.strip() or None,
        task=task.strip() or None,
        item=check_id(item.strip()) if item.strip() else None,
    )


def _recent(store: Store, chosen: Filters) -> list[JournalEntry]:
    with store.read():
        last = store.activity.last_seq()
        return store.activity.recent(
            before=last + 1,
            window=WINDOW,
            limit=SHOWN,
            kind=chosen.kind,
            task=chosen.task,
            item_id=chosen.item,
        )


@view("/ui/journal")
async def journal(
    request: Request[Any, Any, Any],
    stores: Stores,
    kind: Filter = "",
    task: Filter = "",
    item: Filter = "",
) -> Response[str]:
    chosen = filters(kind, task, item)
    entries = await stores.run(lambda s: _recent(s, chosen))
    return show(request, "journal.html", entries=entries, filters=chosen, window=WINDOW)


ROUTES = [journal]
