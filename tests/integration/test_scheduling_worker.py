"""Scheduling end to end with a real in-process worker: adaptive revisits, eventful runs,
not-found cooldowns, listers, dry runs."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import trawl
from tests.integration.helpers import item, job_of
from trawl.runtime.dryrun import dry_run
from trawl.runtime.worker import Worker
from trawl.store.sql import q
from trawl.store.store import Store

HOUR = 3600.0


def run(app: trawl.App, url: str) -> None:
    assert asyncio.run(Worker(app, url=url, concurrency=4, exit_when_idle=True).run()) == 0


def test_adaptive_revisits_widen_when_nothing_changes(db_url: str) -> None:
    app = trawl.App()

    @app.task(tags=["repo"], revisit=trawl.adaptive(min="1h", max="64h"))
    async def visit(ctx: trawl.Context) -> dict[str, Any]:
        return {"head": "abc"}  # the same every time: uneventful after the first

    with Store(db_url) as store:
        store.add_items([item("repo:1", "repo")])
    dues = []
    for _ in range(4):
        started = time.time()
        run(app, db_url)
        with Store(db_url) as store:
            job = job_of(store, "repo:1", "visit")
            assert job.due_at is not None
            dues.append(job.due_at - started)
            store.expire("visit")
    # first run eventful (offset 0 -> 0), then +1 each: 1h, 1h, 2**(1/6)... widening
    assert 0.9 * HOUR <= dues[0] <= 1.1 * HOUR + 5
    assert dues[-1] > dues[0] * 1.05


def test_not_found_and_listers(db_url: str) -> None:
    app = trawl.App()

    @app.task(tags=["repo"], not_found_limit=1)
    async def visit(ctx: trawl.Context) -> None:
        raise trawl.NotFound("404 from the forge")

    @app.task(tags=["forge"])
    async def lister(ctx: trawl.Context) -> None:
        ctx.upsert_item("repo:1", tags=["repo"], data={"url": "u1"}, last_update=1000.0)

    with Store(db_url) as store:
        store.add_items([item("repo:1", "repo")])
    run(app, db_url)
    with Store(db_url) as store:
        job = job_of(store, "repo:1", "visit")
        assert (job.status, job.due_at) == (trawl.JobStatus.FAILED, None)  # disabled at once
        store.add_items([item("forge:1", "forge")])
    lister_only = trawl.App()
    lister_only.tasks["lister"] = app.tasks["lister"]  # so the disabled visit is not retried
    run(lister_only, db_url)
    with Store(db_url) as store:
        view = store.get_item("repo:1")
        assert view is not None
        assert view.data == {"url": "u1"}
        assert job_of(store, "repo:1", "visit").due_at is not None  # relisted: due again


def test_dry_run_writes_nothing(db_url: str) -> None:
    app = trawl.App()

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        ctx.update_data(lambda old: {**old, "title": "T"})
        ctx.create_item(f"review:{ctx.id}", tags=["review"])
        return {"price": 1}

    with Store(db_url) as store:
        store.add_items([item(f"sku:{n}", "product", n=n) for n in range(3)])

    def counts() -> dict[str, int]:
        with Store(db_url) as store:
            return {
                table: int(store.db.execute(q(f"SELECT count(*) FROM {table}")).scalar())
                for table in ("items", "aliases", "tags", "jobs", "journal", "failures", "tasks")
            }

    before = counts()
    reports = asyncio.run(dry_run(app, db_url, None, limit=10))
    assert counts() == before
    assert len(reports) == 3
    first = reports[0]
    assert first.result == {"price": 1}
    diff = next(e for e in first.effects if e["effect"] == "UpdateData")["diff"]
    assert diff["added"] == {"title": "T"}


@pytest.mark.parametrize("changed", [True, False])
def test_ctx_eventful_overrides_the_hash(db_url: str, changed: bool) -> None:
    app = trawl.App()

    @app.task(tags=["repo"], revisit=trawl.adaptive(min="1h", max="64h"))
    async def visit(ctx: trawl.Context) -> dict[str, Any]:
        ctx.eventful(changed)
        return {"n": ctx.attempt}

    with Store(db_url) as store:
        store.add_items([item("repo:1", "repo")])
    for _ in range(3):
        run(app, db_url)
        with Store(db_url) as store:
            store.expire("visit")
    with Store(db_url) as store:
        offset = store.db.execute(
            q("SELECT revisit_offset FROM jobs WHERE task = 'visit'")
        ).scalar()
    assert offset == (0 if changed else 3)
