"""A real worker, in this process, claiming and committing through a real tracker: what its
tasks ask of their context arrives in the database as a local worker's would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import trawl
from tests.integration.helpers import item
from tests.pipelines.conftest import Tracker
from trawl.model.errors import TrawlError
from trawl.runtime.remote.connection import PipelineRefused
from trawl.runtime.remote.run import Remote
from trawl.runtime.worker import Worker
from trawl.store.store import Store


def remote_worker(tracker: Tracker, app: trawl.App, pipeline: str = "p1", **options: Any) -> Worker:
    remote = Remote(tracker.ws, pipeline, tracker.tokens[pipeline])
    backend = remote.backend(options.pop("slots", 8))
    return Worker(
        app, owner=backend.owner, backend=backend, exit_when_idle=True, grace=5, **options
    )


def run_worker(worker: Worker) -> None:
    assert asyncio.run(asyncio.wait_for(worker.run(), 60)) == 0


def seed(db: str, *items: Any) -> None:
    with Store(db) as store:
        store.add_items(list(items))


def test_effects_and_reads_cross_to_the_database(tracker: Tracker) -> None:
    tracker.pipeline("p1")
    app = trawl.App()

    @app.task(tags=["page"])
    async def scrape(ctx: trawl.Context) -> dict[str, Any]:
        ctx.data["scratch"] = "a task may scribble on its own copy"
        ctx.update_data(lambda d: {**d, "visits": d.get("visits", 0) + 1, "old": None})
        ctx.update_data(lambda d: {**d, "visits": d["visits"] * 10})  # sees the first one
        ctx.create_item(f"review:{ctx.id}", tags=["review"], data={"of": ctx.id})
        ctx.add_tags(("scraped", "yes"))
        ctx.create_alias(f"alias:{ctx.id}")
        ctx.log("note", "scraped remotely")
        other = await ctx.get_item("page:b" if ctx.id == "page:a" else "page:a")
        return {"title": ctx.data["title"], "other": other.data["title"] if other else None}

    @app.task(tags=["review"])
    async def rate(ctx: trawl.Context) -> dict[str, Any]:
        scraped = await ctx.get_metadata("scrape", ctx.data["of"])
        ctx.update_metadata(lambda m: {**m, "rated": True}, task="scrape", id=ctx.data["of"])
        return {"title": scraped["title"] if scraped else None}

    seed(
        tracker.db,
        item("page:a", "page", title="A", old=1),
        item("page:b", "page", title="B", old=2),
    )
    worker = remote_worker(tracker, app)
    run_worker(worker)
    assert worker.stats.done == 4
    with Store(tracker.db) as store:
        a = store.get_item("alias:page:a")
        assert a is not None
        assert a.id == "page:a"
        assert a.data == {"title": "A", "visits": 10}  # the patches, not the scribble
        assert a.tags == {"page": None, "scraped": "yes"}
        assert store.get_metadata("scrape", "page:a") == {"title": "A", "other": "B", "rated": True}
        assert store.get_metadata("rate", "review:page:b") == {"title": "B"}
        journal = store.journal(limit=1000)
    assert [e.detail["message"] for e in journal if e.kind == "log"] == ["scraped remotely"] * 2


def test_merging_through_the_tracker_runs_the_merge_on_the_pipeline(tracker: Tracker) -> None:
    tracker.pipeline("p1")
    app = trawl.App()

    @app.task(tags=["dup"])
    async def dedupe(ctx: trawl.Context) -> None:
        if ctx.id == "sku:2":
            ctx.merge_item("sku:1", merge=lambda into, other: {**other, **into, "merged": True})

    seed(tracker.db, item("sku:1", "dup", price=1), item("sku:2", "dup", price=2, color="red"))
    run_worker(remote_worker(tracker, app))
    with Store(tracker.db) as store:
        merged = store.get_item("sku:2")
    assert merged is not None
    assert (merged.id, merged.data) == ("sku:1", {"price": 1, "color": "red", "merged": True})


def test_what_cannot_cross_fails_its_attempt_saying_why(tracker: Tracker) -> None:
    tracker.pipeline("p1")
    app = trawl.App()

    class Touch:
        def apply(self, store: Store, now: float, task: str) -> None:
            raise AssertionError("a custom effect never runs on the server from a pipeline")

    @app.task(tags=["x"], retries=0)
    async def custom(ctx: trawl.Context) -> None:
        ctx.custom(Touch())

    @app.task(tags=["y"], retries=0)
    async def direct(ctx: trawl.Context) -> None:
        await ctx.with_store(lambda store: store.url)

    seed(tracker.db, item("x:1", "x"), item("y:1", "y"))
    worker = remote_worker(tracker, app)
    run_worker(worker)
    assert (worker.stats.done, worker.stats.failed) == (0, 2)
    with Store(tracker.db) as store:
        why = {f.item_id: (f.error_type, f.message) for f in store.failures()}
    assert why["x:1"][0] == "NotRemotable"
    assert "has no wire form" in why["x:1"][1]
    assert "ctx.with_store needs the database" in why["y:1"][1]


def test_a_keyed_rate_limit_is_refused_before_anything_is_claimed(tracker: Tracker) -> None:
    tracker.pipeline("p1")
    app = trawl.App()
    app.limit("per-host", "2/s", tasks=["fetch"], key=lambda it: it.data.get("host"))

    @app.task(tags=["url"])
    async def fetch(ctx: trawl.Context) -> None:
        return None

    with pytest.raises(TrawlError, match="keyed rate limit 'per-host'"):
        run_worker(remote_worker(tracker, app))


def test_a_wrong_token_stops_the_worker_with_a_clear_error(tracker: Tracker) -> None:
    tracker.pipeline("p1")
    tracker.tokens["p1"] = "not-the-token"
    app = trawl.App()

    @app.task(tags=["x"])
    async def noop(ctx: trawl.Context) -> None:
        return None

    with pytest.raises(PipelineRefused, match=r"refused pipeline 'p1'.*HTTP 401"):
        run_worker(remote_worker(tracker, app))


def test_slots_are_the_lower_of_the_workers_and_the_pipelines(tracker: Tracker) -> None:
    tracker.pipeline("p1", slots=3)
    app = trawl.App()
    running = peak = 0

    @app.task(tags=["x"])
    async def slow(ctx: trawl.Context) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1

    seed(tracker.db, *(item(f"x:{n}", "x") for n in range(20)))
    worker = remote_worker(tracker, app, concurrency=16, slots=16)
    run_worker(worker)
    assert worker.stats.done == 20
    assert peak == 3
