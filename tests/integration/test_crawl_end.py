"""A crawl run from the command line (foreground.py) sees its own end at once, however
rarely it counts its pages otherwise: the worker says when it finds nothing left to claim.
And it works on its pages only."""

from __future__ import annotations

import asyncio
import time

from tests.support import site_crawl
from trawl.crawl import foreground, operations
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate
from trawl.model.records import NewItem
from trawl.runtime import recurring
from trawl.runtime.app import App
from trawl.store import migrate
from trawl.store.store import Store


def test_a_crawl_counted_rarely_still_ends_as_soon_as_its_work_is_done(db_url: str) -> None:
    with SiteServer(generate(60)) as server:
        crawl_id = site_crawl.create(db_url, server, depth=3)
        started = time.monotonic()
        last = asyncio.run(foreground.run(db_url, crawl_id, concurrency=4, lease=30.0, every=120.0))
        took = time.monotonic() - started
    assert last.status == operations.FINISHED
    assert last.done > 0
    assert last.ready == last.claimed == 0
    assert took < 60, f"the crawl ended {took:.1f} s after it started: its end went unseen"


def test_a_crawl_process_leaves_the_databases_schedules_to_its_workers(db_url: str) -> None:
    # A `trawl crawl` process ends with its crawl and stops what it runs then: a schedule's
    # action (an hour-long `add --file`, say) taken up there would be killed and run again.
    due = recurring.make("nightly", "* * * * *", "UTC", ("add", "url:z"), time.time() - 3600)
    with Store(db_url) as store:
        migrate.ensure(store.db, auto=store.is_sqlite)
        store.register_tasks([App(db_url).get(recurring.TASK).info()])
        store.add_items(
            [NewItem(id=due.item_id, tags=((recurring.TAG, None),), data=due.to_data())]
        )
    with SiteServer(generate(20)) as server:
        crawl_id = site_crawl.create(db_url, server, depth=2)
        last = asyncio.run(foreground.run(db_url, crawl_id, concurrency=4, lease=30.0))
    assert last.status == operations.FINISHED
    assert last.done > 0
    with Store(db_url) as store:
        assert store.get_metadata(recurring.TASK, due.item_id) is None
        assert store.get_item("url:z") is None
        item = store.get_item(due.item_id)
        assert item is not None
        [job] = [j for j in item.jobs if j.task == recurring.TASK]
        assert job.attempt == 0
        assert not job.ever_run
