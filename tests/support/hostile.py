"""A hostile web site for the crawler's tests, served on 127.0.0.1 by aiohttp in a thread.

Every page a well-behaved crawler must survive: CSS and HTML that bait quadratic parsing,
decompression bombs for every coding, a slow-drip body, endless and looping redirects, a
page with 50,000 links, giant headers, malformed HTML and encodings, and a robots.txt with
wildcards, longest-match rules, a redirect and a huge Crawl-delay. A second host's
robots.txt answers 503 at first. Each host logs every request start (path, time).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import brotli
from aiohttp import web

NORMAL = 20  # ordinary pages a crawl must fetch, a chain from the index
BOMB = 100 << 20  # decoded size of each bomb (the crawler decodes at most 20 MiB)
MANY = 50_000

ROBOTS = """User-agent: *
Allow: /
Disallow: /private
Disallow: /*.pdf$
Crawl-delay: 3600
"""


@dataclass
class Host:
    """One served host: its base URL and the request log."""

    base: str = ""
    log: list[tuple[str, float]] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [path for path, _ in self.log]

    def first(self, path: str) -> float:
        return next(at for p, at in self.log if p == path)


def _page(*links: str, body: str = "") -> web.Response:
    anchors = "".join(f'<a href="{link}">{link}</a>\n' for link in links)
    return web.Response(text=f"<html><body>{body}{anchors}</body></html>", content_type="text/html")


def _bombs() -> dict[str, bytes]:
    zeros = b"<html>" + b" " * BOMB
    return {
        "gzip": gzip.compress(zeros, compresslevel=1),
        "deflate": zlib.compress(zeros, 1),
        "br": bytes(brotli.compress(zeros, quality=1)),
    }


def _hostile_routes(bombs: dict[str, bytes]) -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.get("/")
    async def index(_: web.Request) -> web.Response:
        return _page(
            "/normal/0", "/css-bait.html", "/style.css", "/bomb/gzip", "/bomb/deflate",
            "/bomb/br", "/drip", "/redirect/0", "/loop/a", "/many", "/giant-headers",
            "/malformed", "/doc.pdf", "/doc.pdfx", "/private/secret", "/public",
        )  # fmt: skip

    @routes.get("/robots.txt")
    async def robots(_: web.Request) -> web.Response:
        raise web.HTTPFound("/real-robots.txt")

    @routes.get("/real-robots.txt")
    async def real_robots(_: web.Request) -> web.Response:
        return web.Response(text=ROBOTS)

    @routes.get("/normal/{n}")
    async def normal(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        return _page(f"/normal/{n + 1}") if n + 1 < NORMAL else _page()

    @routes.get("/css-bait.html")
    async def css_bait(_: web.Request) -> web.Response:
        return _page("/normal/0", body="<style>a{b:" + "url(" * 300_000 + "</style>")

    @routes.get("/style.css")
    async def css(_: web.Request) -> web.Response:
        return web.Response(text="a{b:" + "url('" * 300_000, content_type="text/css")

    @routes.get("/bomb/{coding}")
    async def bomb(request: web.Request) -> web.Response:
        coding = request.match_info["coding"]
        headers = {"Content-Encoding": coding, "Content-Type": "text/html"}
        return web.Response(body=bombs[coding], headers=headers)

    @routes.get("/drip")
    async def drip(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        for _ in range(600):  # far longer than the crawl's request timeout
            await resp.write(b" ")
            await asyncio.sleep(0.1)
        return resp

    @routes.get("/redirect/{n}")
    async def endless(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"/redirect/{int(request.match_info['n']) + 1}")

    @routes.get("/loop/a")
    async def loop_a(_: web.Request) -> web.Response:
        raise web.HTTPFound("/loop/b")

    @routes.get("/loop/b")
    async def loop_b(_: web.Request) -> web.Response:
        raise web.HTTPFound("/loop/a")

    @routes.get("/many")
    async def many(_: web.Request) -> web.Response:
        return _page(*(f"/many/{n}" for n in range(MANY)))

    @routes.get("/giant-headers")
    async def giant_headers(_: web.Request) -> web.Response:
        return web.Response(text="x", headers={f"X-Big-{n}": "y" * 8000 for n in range(40)})

    @routes.get("/malformed")
    async def malformed(_: web.Request) -> web.Response:
        body = b"<html><a href='/normal/1'>\xff\xfe<<<</a><a href=\"\x00\x01\"><div<<"
        return web.Response(body=body, headers={"Content-Type": "text/html; charset=nonsense"})

    @routes.get("/{tail:.*}")
    async def anything(_: web.Request) -> web.Response:
        return _page()

    return routes


def _flaky_robots_routes(failures: int) -> web.RouteTableDef:
    """A host whose robots.txt answers 503 *failures* times, then allows everything."""
    routes = web.RouteTableDef()
    asked = {"n": 0}

    @routes.get("/robots.txt")
    async def robots(_: web.Request) -> web.Response:
        asked["n"] += 1
        if asked["n"] <= failures:
            return web.Response(status=503, text="busy")
        return web.Response(text="User-agent: *\nDisallow:\n")

    @routes.get("/{tail:.*}")
    async def anything(_: web.Request) -> web.Response:
        return _page("/page")

    return routes


def _logging(host: Host) -> web.middleware:  # type: ignore[valid-type]
    @web.middleware
    async def log(request: web.Request, handler: web.Handler) -> web.StreamResponse:
        host.log.append((request.path, time.time()))
        return await handler(request)

    return log


@contextmanager
def serve(*, robots_failures: int = 1) -> Iterator[tuple[Host, Host]]:
    """The hostile host and the host whose robots.txt errs first, both on 127.0.0.1."""
    routes = [_hostile_routes(_bombs()), _flaky_robots_routes(robots_failures)]
    with serve_hosts(routes) as (hostile, flaky):
        yield hostile, flaky


@contextmanager
def serve_hosts(routes: list[web.RouteTableDef]) -> Iterator[list[Host]]:
    """One logged host on 127.0.0.1 per route table, served from a thread."""
    hosts = [Host() for _ in routes]
    loop = asyncio.new_event_loop()
    started = threading.Event()
    runners: list[web.AppRunner] = []

    async def start() -> None:
        for host, table in zip(hosts, routes, strict=True):
            app = web.Application(middlewares=[_logging(host)])
            app.add_routes(table)
            runner = web.AppRunner(app, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            host.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
            runners.append(runner)

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(30)
    try:
        yield hosts
    finally:
        for runner in runners:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
