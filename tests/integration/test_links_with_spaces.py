"""Links and redirects whose path or query holds a space (``/files/My Report.pdf``) are
followed, as browsers, wget and Scrapy follow them: the space goes out as %20."""

from __future__ import annotations

from aiohttp import web

from tests.support import hostile, site_crawl
from trawl.crawl.options import Options


def _routes() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.get("/")
    async def index(_: web.Request) -> web.Response:
        links = '<a href="/files/My Report.html">r</a><a href="/go there">g</a>'
        return web.Response(text=f"<html>{links}</html>", content_type="text/html")

    @routes.get("/go there")
    async def redirect(_: web.Request) -> web.Response:
        # The Location as some servers send it, unencoded (web.HTTPFound would encode it).
        return web.Response(status=302, headers={"Location": "/found it?q=a b"})

    @routes.get("/{tail:.*}")
    async def page(_: web.Request) -> web.Response:
        return web.Response(text="<html>fine</html>", content_type="text/html")

    return routes


def test_links_and_redirects_with_spaces_are_followed(db_url: str) -> None:
    with hostile.serve_hosts([_routes()]) as (host,):
        seeds = (f"{host.base}/",)
        crawl_id = site_crawl.create(
            db_url, None, seeds=seeds, depth=3, options=Options(robots=False)
        )
        site_crawl.run(db_url, crawl_id)
    assert {"/files/My Report.html", "/go there", "/found it"} <= set(host.paths())
    pages = site_crawl.pages(db_url, crawl_id)
    assert {u: p["state"] for u, p in pages.items()} == {
        f"{host.base}/": "DONE",
        f"{host.base}/files/My%20Report.html": "DONE",
        f"{host.base}/go%20there": "DONE",
        f"{host.base}/found%20it?q=a%20b": "DONE",
    }
