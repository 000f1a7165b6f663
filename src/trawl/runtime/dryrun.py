"""``--dry-run``: run tasks on due jobs against the real database without writing anything,
and describe what each attempt would commit."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from trawl.model import effects as fx
from trawl.model.records import ClaimedJob
from trawl.runtime.app import App, TaskDef
from trawl.runtime.context import Context, asks
from trawl.runtime.store_thread import StoreThread
from trawl.store import codec
from trawl.store.store import Store


@dataclass(kw_only=True, slots=True)
class DryRunJob:
    """What one attempt would commit."""

    item: str
    task: str
    outcome: str  # "done" or "failed"
    result: Any = None
    error: str | None = None
    effects: list[dict[str, Any]] = field(default_factory=list)


async def dry_run(app: App, url: str, tasks: list[str] | None, limit: int) -> list[DryRunJob]:
    """Run up to *limit* due jobs of *tasks* (all when ``None``) and report their effects."""
    store = Store(url)
    db = StoreThread(store)
    try:
        await db.call(lambda: store.ensure_schema(auto=False))
        defs = {d.name: d for d in app.select(tasks)}
        jobs = await db.call(store.peek_due, {n: d.tags for n, d in defs.items()}, limit)
        return [await _run(defs[job.task], job, db) for job in jobs]
    finally:
        await asyncio.to_thread(db.close)


async def _run(d: TaskDef, job: ClaimedJob, db: StoreThread) -> DryRunJob:
    loop = asyncio.get_running_loop()
    ctx = Context(
        id=job.item_id,
        data=dict(job.data),
        tags=job.tags,
        attempt=job.attempt,
        task=d.name,
        reader=db,
        loop=loop,
    )
    report = DryRunJob(item=job.item_id, task=d.name, outcome="done")
    try:
        async with asyncio.timeout(d.timeout):  # not wait_for: it can swallow a Ctrl-C
            if d.is_async:
                value = await d.fn(ctx)
            else:
                value = await asyncio.to_thread(d.fn, ctx)
        report.result = value
    except Exception as error:
        report.outcome, report.error = "failed", f"{type(error).__name__}: {error}"
        if not asks(ctx).allow_failure:
            return report  # a failed attempt commits nothing of what it asked for
    report.effects = [await _describe(e, db) for e in asks(ctx).effects]
    return report


async def _describe(effect: fx.Effect, db: StoreThread) -> dict[str, Any]:
    kind = type(effect).__name__
    if isinstance(effect, fx.UpdateData):
        item = await db.get_item(effect.id)
        old = dict(item.data) if item else {}
        return {"effect": kind, "id": effect.id, "diff": _diff(old, _apply(effect.fn, old))}
    if isinstance(effect, fx.UpdateMetadata):
        old = await db.get_metadata(effect.task, effect.id) or {}
        new = _apply(effect.fn, dict(old))
        return {"effect": kind, "id": effect.id, "task": effect.task, "diff": _diff(old, new)}
    described = {
        name: getattr(effect, name)
        for name in effect.__dataclass_fields__
        if not callable(getattr(effect, name))
    }
    plain: dict[str, Any] = codec.loads(codec.dumps(_plain(described)))
    return {"effect": kind} | plain


def _apply(fn: fx.Updater, old: dict[str, Any]) -> Any:
    try:
        return fn(dict(old))
    except Exception as error:
        return {"<error>": f"{type(error).__name__}: {error}"}


def _diff(old: dict[str, Any], new: Any) -> dict[str, Any]:
    if not isinstance(new, dict):
        return {"replaced_with": repr(new)}
    return {
        "added": {k: new[k] for k in new.keys() - old.keys()},
        "changed": {k: [old[k], new[k]] for k in new.keys() & old.keys() if old[k] != new[k]},
        "removed": sorted(old.keys() - new.keys()),
    }


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if not callable(v)}
    if hasattr(value, "__dataclass_fields__"):
        return {n: _plain(getattr(value, n)) for n in value.__dataclass_fields__}
    return value
