"""A page's requests, answered by the crawler instead of the browser's network stack.

Every request the page makes is intercepted (Playwright's ``page.route``): the first
main-frame navigation is answered with the document the crawler already fetched, and every
other request is fetched by the crawler's own HTTP client through the politeness gate
(*fetch*, which also writes it to the WARC) and handed to the browser with
``route.fulfill``. So the WARC holds the bytes as they crossed the wire, deduplicated like
any other fetch, and the browser's sub-requests count against their host's politeness. A
later main-frame navigation (a script moving the page away) is not followed: its target
is kept as an outlink instead, so the DOM captured is this page's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trawl.crawl.client import FetchError, Response

if TYPE_CHECKING:
    from playwright.async_api import Request, Route

log = logging.getLogger("trawl.crawl.browser")

QUIET = 0.5  # network idle: no request in flight for this long
# Hop-by-hop and framing headers describe the bytes on the wire, not the decoded body the
# browser is handed.
_DROPPED = {"content-encoding", "content-length", "transfer-encoding", "connection"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Outgoing:
    """A request the page made, as the crawler is to send it."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None


Fetch = Callable[[Outgoing], Awaitable[Response]]


class Traffic:
    """Answers one page's requests; counts them and tells when the network is idle."""

    def __init__(self, document: Response, fetch: Fetch) -> None:
        self.document = document
        self.fetch = fetch
        self.requests = 0  # answered from the network (the document not counted)
        self.failed = 0  # fetches that got no response, or were refused
        self.navigations: list[str] = []  # main-frame moves not followed
        self._served_document = False
        self._inflight = 0
        self._last = time.monotonic()
        self._changed = asyncio.Event()

    async def handle(self, route: Route) -> None:
        """The ``page.route`` handler: every request of the page comes through here."""
        request = route.request
        if _main_navigation(request):
            if self._served_document:
                self.navigations.append(request.url)
                await _quietly(route.abort("aborted"))
                return
            self._served_document = True
            await _quietly(_fulfill(route, self.document))
            return
        self._begin()
        try:
            await self._answer(route, request)
        finally:
            self._end()

    async def _answer(self, route: Route, request: Request) -> None:
        outgoing = Outgoing(
            method=request.method,
            url=request.url,
            headers=await _headers(request),
            body=request.post_data_buffer,
        )
        try:
            resp = await self.fetch(outgoing)
        except Exception as error:  # the page sees a network error, as a browser would
            self.failed += 1
            level = logging.DEBUG if isinstance(error, FetchError) else logging.WARNING
            log.log(level, "%s %s: %s", request.method, request.url, error)
            await _quietly(route.abort("failed"))
            return
        self.requests += 1
        try:
            await _quietly(_fulfill(route, resp))
        finally:
            resp.exchange.body.close()

    def _begin(self) -> None:
        self._inflight += 1
        self._touch()

    def _end(self) -> None:
        self._inflight -= 1
        self._touch()

    def _touch(self) -> None:
        self._last = time.monotonic()
        self._changed.set()

    async def idle(self, cap: float) -> bool:
        """Wait until no request has been in flight for :data:`QUIET` seconds, at most *cap*
        seconds; returns whether the network went idle."""
        deadline = time.monotonic() + cap
        while True:
            now = time.monotonic()
            quiet_for = now - self._last
            if self._inflight == 0 and quiet_for >= QUIET:
                return True
            left = deadline - now
            if left <= 0:
                return False
            self._changed.clear()
            wait = left if self._inflight else min(left, QUIET - quiet_for)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):  # not wait_for: it can swallow a cancel
                    await self._changed.wait()


def _main_navigation(request: Request) -> bool:
    return request.is_navigation_request() and request.frame.parent_frame is None


async def _headers(request: Request) -> dict[str, str]:
    """The headers the browser would send (cookies included), minus what the crawler's
    client sets itself."""
    sent = await request.all_headers()
    return {k: v for k, v in sent.items() if k.lower() not in ("accept-encoding", "host")}


async def _fulfill(route: Route, resp: Response) -> None:
    headers: dict[str, str] = {}
    for name, value in resp.exchange.response_headers:
        key = name.lower()
        if key in _DROPPED:
            continue
        separator = "\n" if key == "set-cookie" else ", "
        headers[key] = f"{headers[key]}{separator}{value}" if key in headers else value
    body = await asyncio.to_thread(resp.decoded)
    await route.fulfill(status=resp.status, headers=headers, body=body)


async def _quietly(answer: Awaitable[None]) -> None:
    """Answer a request whose page may be gone already (its attempt timed out, the browser
    crashed): then there is no one left to answer."""
    try:
        await answer
    except Exception as error:
        log.debug("a request's page is gone: %s", error)
