"""A crawl run from the command line sees its own end at once, however rarely it counts
its pages otherwise (foreground.py): the worker says when it finds nothing left to claim."""

from __future__ import annotations

import asyncio
import time

from tests.support import site_crawl
from trawl.crawl import foreground, operations
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate


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
