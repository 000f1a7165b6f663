"""Plugins in a real worker, on both backends: a plugin that raises loses nothing, and a
plugin sees what each commit did to jobs and items."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import trawl
from tests.integration.helpers import item
from trawl.model.records import AttemptResult, ClaimedJob
from trawl.runtime.worker import Worker
from trawl.store.store import Store

pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")


class Raising:
    """Fails in every hook a worker fires."""

    def __init__(self) -> None:
        self.calls = 0

    def _fail(self) -> None:
        self.calls += 1
        raise RuntimeError("plugin bug")

    @trawl.hookimpl
    def trawl_actor_startup(self) -> None:
        self._fail()

    @trawl.hookimpl
    def trawl_job_claimed(self) -> None:
        self._fail()

    @trawl.hookimpl
    def trawl_actor_tick_start(self) -> None:
        self._fail()

    @trawl.hookimpl
    def trawl_actor_tick_exception(self) -> None:
        self._fail()

    @trawl.hookimpl
    def trawl_actor_tick_end(self) -> None:
        self._fail()

    @trawl.hookimpl
    def trawl_job_done(self) -> None:
        self._fail()

    @trawl.hookimpl
    def trawl_job_failed(self) -> None:
        self._fail()

    @trawl.hookimpl
    def trawl_item_created(self) -> None:
        self._fail()

    @trawl.hookimpl
    def trawl_actor_shutdown(self) -> None:
        self._fail()


def _app(*plugins: object) -> trawl.App:
    app = trawl.App(plugins=plugins)

    @app.task(tags=["product"], retries=0)
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        if ctx.id == "sku:bad":
            raise ValueError("bad item")
        if ctx.id == "sku:slow":
            await asyncio.sleep(3600)
        ctx.create_item(f"{ctx.id}:review")
        return {"ok": True}

    return app


def _add(url: str, *ids: str) -> None:
    with Store(url) as store:
        store.add_items([item(i, "product") for i in ids])


def test_a_plugin_that_raises_in_every_hook_loses_no_job(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    raising = Raising()
    ids = [f"sku:{n}" for n in range(10)]
    _add(db_url, *ids, "sku:bad")
    worker = Worker(_app(raising), url=db_url, concurrency=4, exit_when_idle=True)
    with caplog.at_level(logging.ERROR, logger="trawl.plugins"):
        assert asyncio.run(worker.run()) == 0
    assert (worker.stats.done, worker.stats.failed) == (10, 1)
    # startup, shutdown; per job claimed, tick start, tick end, done or failed; one tick
    # exception; one item created per success.
    assert raising.calls == 2 + 11 * 4 + 1 + 10
    assert len(caplog.records) == raising.calls
    with Store(db_url) as store:
        counts = {row.task: row for row in store.status()}
        assert (counts["price"].done, counts["price"].failed) == (10, 1)
        assert all(store.get_item(f"{i}:review") is not None for i in ids)


class Seen:
    def __init__(self, worker_box: list[Worker]) -> None:
        self.events: list[tuple[str, str]] = []
        self.worker_box = worker_box

    @trawl.hookimpl
    def trawl_actor_tick_start(self, job: ClaimedJob) -> None:
        if job.item_id == "sku:slow":
            asyncio.get_running_loop().call_later(0.2, self.worker_box[0].stop)

    @trawl.hookimpl
    def trawl_job_done(self, actor: trawl.ActorInfo, job: AttemptResult) -> None:
        assert actor.type == "worker"
        self.events.append(("done", job.item_id))

    @trawl.hookimpl
    def trawl_job_released(self, job: AttemptResult) -> None:
        self.events.append(("released", job.item_id))

    @trawl.hookimpl
    def trawl_item_created(self, item_id: str, task: str) -> None:
        self.events.append(("created", f"{item_id} by {task}"))


def test_a_plugin_sees_commits_items_and_releases(db_url: str) -> None:
    box: list[Worker] = []
    seen = Seen(box)
    _add(db_url, "sku:1", "sku:slow")
    worker = Worker(_app(seen), url=db_url, concurrency=4, grace=0.1)
    box.append(worker)
    assert asyncio.run(worker.run()) == 0
    assert sorted(seen.events) == [
        ("created", "sku:1:review by price"),
        ("done", "sku:1"),
        ("released", "sku:slow"),
    ]
    assert seen.events.index(("created", "sku:1:review by price")) < seen.events.index(
        ("done", "sku:1")
    )
