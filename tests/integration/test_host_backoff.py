"""A host that errs backs off as a whole, without spending its pages' tries: an outage
longer than the fetch task's retries fails none of its pages, and other hosts go on."""

from __future__ import annotations

import time

import pytest
from aiohttp import web

from tests.support import hostile, site_crawl
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options

pytestmark = pytest.mark.timing  # judges time: runs alone (scripts/check)

OUTAGE = 10.0  # longer than three retries at 1 s doubling (at most 7 s)
PAGES = 6


def _routes(down_until: list[float]) -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.get("/robots.txt")
    async def robots(_: web.Request) -> web.Response:
        return web.Response(status=404)

    @routes.get("/{n}")
    async def page(request: web.Request) -> web.Response:
        if time.time() < down_until[0]:
            return web.Response(status=503, text="down")
        n = int(request.match_info["n"] or 0)
        links = "".join(f'<a href="/{m}">{m}</a>' for m in range(PAGES) if n == 0 and m)
        return web.Response(text=f"<html>{links}</html>", content_type="text/html")

    return routes


def test_an_outage_of_one_host_fails_none_of_its_pages(sqlite_url: str) -> None:
    down_until = [time.time() + OUTAGE]
    with hostile.serve_hosts([_routes(down_until), _routes([0.0])]) as (down, up):
        seeds = (f"{down.base}/0", f"{up.base}/0")
        options = Options(timeout=5.0)
        crawl_id = _create(sqlite_url, seeds, options)
        site_crawl.run(sqlite_url, crawl_id)
    pages = site_crawl.pages(sqlite_url, crawl_id)
    assert len(pages) == 2 * PAGES
    assert {p["state"] for p in pages.values()} == {"DONE"}
    # The healthy host went on at full speed while the other was down.
    assert max(at for _, at in up.log) < down_until[0]
    # The host backed off: far fewer requests than pages x retries during the outage.
    during = [at for path, at in down.log if path != "/robots.txt" and at < down_until[0]]
    assert 2 <= len(during) <= 8


def _create(url: str, seeds: tuple[str, ...], options: Options) -> int:
    from trawl.crawl import operations
    from trawl.crawl.app import make_app
    from trawl.store import migrate
    from trawl.store.crawls import FETCH_TASK
    from trawl.store.store import Store

    with Store(url) as store:
        migrate.ensure(store.db, auto=True)
        operations.register(store, make_app().get(FETCH_TASK).info())
        return operations.create(store, CrawlSpec(seeds=seeds, depth=1, options=options))
