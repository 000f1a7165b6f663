"""A fetch attempt's browser half: the page's document, already fetched through the gate,
rendered in the worker's Chromium; its sub-requests fetched, paced and archived here.

Which pages render: HTML answered 2xx in full, when a ``render`` rule or the crawl's
``--browser`` says so. Anything else (redirects, errors, images, a cut body) is handled as
a plain fetch, so depth, redirects and retries mean the same either way.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any

from trawl.crawl import client, extract, pacing, personas, urls
from trawl.crawl.blocks import block_of
from trawl.crawl.browser.capture import Rendered, RenderFailed, Timing, render
from trawl.crawl.browser.chromium import BrowserUnavailable
from trawl.crawl.browser.traffic import Outgoing, Traffic
from trawl.crawl.client import FetchError, LateStart, Response
from trawl.crawl.options import Options, wants_browser
from trawl.crawl.rules import Settings
from trawl.crawl.state import ProcessState
from trawl.crawl.warc import warc_date
from trawl.runtime.context import Context
from trawl.store.crawls import CrawlRow

LATE_TRIES = 3  # a sub-request too late to go out on its start is tried this often


def renders(options: Options, settings: Settings, resp: Response) -> bool:
    """Whether this response is a page to render in the browser."""
    ok = 200 <= resp.status < 300 and not resp.truncated
    return wants_browser(options, settings) and ok and resp.content_type in extract.HTML_TYPES


def lease_for(options: Options, lease: float) -> float:
    """A fetch task timeout (``--lease``) long enough for a browser page of *options*:
    its document's fetch and its whole render deadline, with a margin."""
    timing = Timing(load=options.load_timeout, idle=options.idle_wait)
    return max(lease, options.timeout + timing.deadline + 5.0) if options.browser else lease


@dataclass(kw_only=True, slots=True)
class BrowserPage:
    """What rendering a page adds to its attempt."""

    links: extract.Links
    record: dict[str, Any]  # the attempt's browser columns
    payloads: list[tuple[int, str, str, str]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Page:
    ctx: Context
    rt: ProcessState
    crawl: CrawlRow
    options: Options
    payloads: list[tuple[int, str, str, str]]
    host: str  # the page's
    delay: float  # the page's host's spacing, its Crawl-delay included

    def delay_on(self, host: str) -> float:
        """The spacing of sub-requests to *host*: the page's own host keeps its Crawl-delay;
        another host (whose robots.txt a page's resources do not wait for) the crawl's."""
        return self.delay if host == self.host else self.options.delay


async def render_page(
    ctx: Context,
    rt: ProcessState,
    crawl: CrawlRow,
    settings: Settings,
    url: str,
    document: Response,
    delay: float,
) -> BrowserPage:
    """Render *url* from its fetched *document*; its host's sub-requests are spaced by
    *delay* (the page's own: the crawl's, or the host's Crawl-delay when longer, as
    task._ready makes it); raises RenderFailed if it cannot be."""
    options = Options.from_json(crawl.options)
    page = _Page(
        ctx=ctx,
        rt=rt,
        crawl=crawl,
        options=options,
        payloads=[],
        host=urls.host(url),
        delay=delay,
    )
    traffic = Traffic(document, lambda outgoing: _subrequest(page, outgoing))
    persona = personas.preset(settings.preset) if settings.preset else personas.DEFAULT
    persona = replace(persona, user_agent=settings.user_agent)
    timing = Timing(load=options.load_timeout, idle=options.idle_wait)
    try:
        async with rt.browsers.tab(persona, settings.cookies, url) as tab:
            rendered = await render(tab, url, traffic, timing, settings.custom_js)
    except (RenderFailed, BrowserUnavailable):
        raise
    except Exception as error:  # the browser went away as the tab opened: Playwright's
        raise RenderFailed(f"{type(error).__name__}: {error}") from error  # own errors
    links = await asyncio.to_thread(_links, rendered, traffic.navigations, options.max_links)
    record: dict[str, Any] = {
        "subrequests": traffic.requests + traffic.failed,
        "script_result": rendered.script_result,
    }
    if rendered.load_error:
        record["error"] = rendered.load_error
    if rendered.screenshot is not None and options.warc:
        shot = await rt.archive_resource(
            crawl, url, "image/png", rendered.screenshot, warc_date(time.time())
        )
        record |= {
            "screenshot_file": shot.file,
            "screenshot_offset": shot.offset,
            "screenshot_length": shot.length,
        }
    return BrowserPage(links=links, record=record, payloads=page.payloads)


def _links(rendered: Rendered, navigations: list[str], max_links: int) -> extract.Links:
    """Links of the rendered DOM, then where scripts tried to take the page."""
    found = extract.html_links(rendered.html.encode(), rendered.url, max_links=max_links)
    moved = [u for u in (urls.canonical(n) for n in navigations) if u and u not in found.urls]
    return extract.Links(found.urls + moved[: max(0, max_links - len(found.urls))], found.cut)


async def _subrequest(page: _Page, outgoing: Outgoing) -> Response:
    """Fetch one request of the page through the host's politeness, and archive it."""
    host = urls.host(outgoing.url)
    for _ in range(LATE_TRIES):
        starts = pacing.Starts(page.ctx, page.rt, host, page.delay_on(host))
        not_after = await starts.take()
        try:
            resp = await client.fetch(
                page.rt.client(),
                outgoing.url,
                headers=outgoing.headers,
                timeout=page.options.timeout,
                max_bytes=page.options.max_bytes,
                method=outgoing.method,
                data=outgoing.body,
                not_after=not_after,
                repace=starts.take,
            )
        except LateStart:
            continue  # nothing went out: take the host's next start
        break
    else:
        raise FetchError(f"this process was too busy to send it on time {LATE_TRIES} times")
    try:
        await _held_off(page, resp, host)
        if page.options.warc:
            _, first = await page.rt.archive(page.ctx, page.crawl, resp)
            if first:
                ex = resp.exchange
                page.payloads.append((page.crawl.id, ex.digest, ex.url, ex.date))
    except BaseException:
        resp.exchange.body.close()
        raise
    return resp


async def _held_off(page: _Page, resp: Response, host: str) -> None:
    """A sub-request answered 429 (or 503 with Retry-After) holds off its whole host."""
    block = block_of(resp, host)
    if block is not None:
        page.rt.blocked[block[0]] = block[1]
        await page.rt.port.block(page.ctx, *block)
