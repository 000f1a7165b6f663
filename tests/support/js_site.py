"""A site whose links exist only once JavaScript runs, on 127.0.0.1, for browser tests.

``/`` links plainly to ``/static`` only. Its script (``/app.js``) inserts ``/js-inserted``,
fetches ``/links.json`` and inserts ``/from-json``, and adds a button whose click inserts
``/behind-button`` (the custom script clicks it). ``/static``'s inline script inserts
``/deep-js`` (depth 2). The page also needs ``/style.css`` and ``/pixel.png``, which the
WARC must hold. Hostile pages: ``/hang`` never finishes loading (an image that never
answers), ``/popups`` opens windows without end, ``/throws`` has a script that throws,
``/moves`` sends the browser elsewhere (``/moved-to``) once loaded, ``/throttled`` needs a
script the server answers 429 (Retry-After: 120) to.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from tests.support.stamping_front import ARRIVED, StampingFront

CHROMIUM = "/usr/bin/chromium"

JS_LINKS = ("/js-inserted", "/from-json", "/behind-button", "/deep-js")
SUBRESOURCES = ("/app.js", "/links.json", "/style.css", "/pixel.png")
CLICK = "document.querySelector('#more').click(); return document.links.length;"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)

_ROOT = """<!doctype html><html><head><link rel=stylesheet href="/style.css">
<script src="/app.js"></script></head><body><h1>JS site</h1><a href="/static">static</a>
<img src="/pixel.png"><div id=out></div></body></html>"""
_APP = """
function link(href) {
  const a = document.createElement('a'); a.href = href; a.textContent = href;
  document.getElementById('out').appendChild(a);
}
document.addEventListener('DOMContentLoaded', () => {
  link('/js-inserted');
  fetch('/links.json').then(r => r.json()).then(d => d.links.forEach(link));
  const b = document.createElement('button'); b.id = 'more'; b.textContent = 'more';
  b.onclick = () => link('/behind-button');
  document.body.appendChild(b);
});
"""
_STATIC = """<!doctype html><html><body><p>static</p><div id=out></div><script>
const a = document.createElement('a'); a.href = '/deep-js'; a.textContent = 'deep';
document.getElementById('out').appendChild(a);</script></body></html>"""
_LEAF = "<!doctype html><html><body><p>a leaf</p></body></html>"
_HANG = '<!doctype html><html><body><p>loading forever</p><img src="/never"></body></html>'
_POPUPS = """<!doctype html><html><body><p>popups</p><script>
setInterval(() => {
  window.open('/leaf-popup');
  const a = document.createElement('a'); a.href = '/leaf-popup'; a.target = '_blank';
  document.body.appendChild(a); a.click();
}, 20);
</script></body></html>"""
_MOVES = """<!doctype html><html><body><p>moves away</p><script>
setTimeout(() => { window.location.href = '/moved-to'; }, 10);
</script></body></html>"""
_THROTTLED = """<!doctype html><html><body><p>throttled</p>
<script src="/limited.js"></script><img src="/pixel.png"></body></html>"""
_THROWS = """<!doctype html><html><body><p>throws</p><a href="/leaf-after-throw">x</a>
<script>throw new Error('the page script failed');</script></body></html>"""


def need_chromium() -> None:
    """Skip unless Chromium is here; on CI (CI=true) never skip: a missing browser fails."""
    if os.path.exists(CHROMIUM) or os.environ.get("CI") == "true":
        return
    pytest.skip(
        f"browser capture tests need Debian's chromium at {CHROMIUM} (apt install chromium)"
    )


def _html(body: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(_: web.Request) -> web.Response:
        return web.Response(text=body, content_type="text/html")

    return handler


class JsSite:
    """``with JsSite() as site: site.url('/')``; ``site.log`` lists the paths requested,
    each with when it reached this machine (``time.time``'s clock)."""

    def __init__(self, robots: str | None = None) -> None:
        self.log: list[tuple[float, str]] = []
        self.robots = robots  # the robots.txt served, when given (else it is a 404)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="js-site", daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def paths(self) -> list[str]:
        return [path for _, path in list(self.log)]

    def __enter__(self) -> JsSite:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the JS site did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        runner = web.AppRunner(self._app(), shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        # Clients connect to the front, which tells each request's arrival as the kernel
        # stamped it: a stamp taken here, in a thread of the crawl's own process, can be
        # late by however long the crawl held the GIL.
        front = StampingFront(runner.addresses[0][1])
        await front.start()
        self.port = front.port
        self._ready.set()
        await self._stop.wait()
        await front.close()
        await runner.cleanup()

    def _app(self) -> web.Application:
        @web.middleware
        async def logged(request: web.Request, handler: Callable[..., object]) -> object:
            self.log.append((float(request.headers[ARRIVED]), request.path))
            return await handler(request)  # type: ignore[misc]

        app = web.Application(middlewares=[logged])
        pages = {
            "/": _ROOT,
            "/static": _STATIC,
            "/hang": _HANG,
            "/popups": _POPUPS,
            "/throws": _THROWS,
            "/moves": _MOVES,
            "/throttled": _THROTTLED,
        }
        for path, body in pages.items():
            app.router.add_get(path, _html(body))
        for path in (*JS_LINKS, "/leaf-popup", "/leaf-after-throw", "/moved-to"):
            app.router.add_get(path, _html(_LEAF))
        app.router.add_get("/app.js", self._js)
        app.router.add_get("/links.json", self._json)
        app.router.add_get("/style.css", self._css)
        app.router.add_get("/pixel.png", self._png)
        app.router.add_get("/never", self._never)
        app.router.add_get("/limited.js", self._limited)
        if self.robots is not None:
            app.router.add_get("/robots.txt", self._robots)
        return app

    async def _robots(self, _: web.Request) -> web.Response:
        return web.Response(text=self.robots, content_type="text/plain")

    async def _js(self, _: web.Request) -> web.Response:
        return web.Response(text=_APP, content_type="application/javascript")

    async def _json(self, _: web.Request) -> web.Response:
        return web.json_response({"links": ["/from-json"]})

    async def _css(self, _: web.Request) -> web.Response:
        return web.Response(text="h1 { color: teal }", content_type="text/css")

    async def _png(self, _: web.Request) -> web.Response:
        return web.Response(body=PNG, content_type="image/png")

    async def _limited(self, _: web.Request) -> web.Response:
        return web.Response(status=429, headers={"Retry-After": "120"}, text="slow down")

    async def _never(self, _: web.Request) -> web.Response:
        await asyncio.Event().wait()  # until the server shuts down
        raise AssertionError("unreachable")
