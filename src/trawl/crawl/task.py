"""The fetch task: one attempt at one page, from the politeness gate to the WARC record.

Everything the attempt learns is committed with its job (``ctx.custom``): the attempt's
record, the slots it held, a host block, the payload digest and the links it found.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from dataclasses import dataclass
from typing import Any

from trawl.crawl import client, extract, pacing, rendering, urls
from trawl.crawl.blocks import block_of
from trawl.crawl.browser.capture import RenderFailed
from trawl.crawl.browser.chromium import BrowserUnavailable
from trawl.crawl.client import FetchError, HostHeldOff, LateStart, Response
from trawl.crawl.frontier import Discover, Found
from trawl.crawl.inflight import Permit
from trawl.crawl.options import Options
from trawl.crawl.outcomes import Fetched, Parked, Skipped
from trawl.crawl.pacing import latest_send
from trawl.crawl.politeness import (
    BUSY_RETRY,
    PERMIT_WAIT,
    ROBOTS_PENDING,
    ROBOTS_WAIT_MAX,
    Plan,
    after_block,
    capped_delay,
    slack,
)
from trawl.crawl.robots import MAX_BYTES, MAX_REDIRECTS, UNREACHABLE, Robots, robots_url
from trawl.crawl.rules import Settings
from trawl.crawl.state import ProcessState, runtime
from trawl.crawl.warc import Written
from trawl.model.errors import NotFound
from trawl.runtime.context import Context
from trawl.store.crawls import CrawlRow

# A small plain page is parsed and written to the WARC on the event loop: a hop to a
# thread costs more than that work in GIL hand-offs while the loop is busy (on the demo
# site, 1.5 instead of 2.3 CPU ms a page). Small means few bytes, not content-encoded, and
# little markup: parsing costs about 10 us a tag or url() (and deep nesting more), so a
# hostile page of 64 KiB could otherwise hold the loop for a tenth of a second. Anything
# else is parsed in a thread, so leases, heartbeats and signals go on meanwhile.
INLINE_BYTES = 64 << 10
INLINE_MARKUP = 200  # tags and url( calls
_RNG = random.Random()  # spreads pages coming back from a host's block (after_block)


def _small(resp: Response) -> bool:
    if resp.size > INLINE_BYTES or resp.header("content-encoding") not in (None, "identity"):
        return False
    body = resp.exchange.body
    body.seek(0)
    head = body.read(INLINE_BYTES + 1)
    body.seek(0)
    return head.count(b"<") + head.count(b"url(") <= INLINE_MARKUP


class RetryableHTTP(Exception):
    """A 5xx or 429: the page is tried again after the task's backoff."""


class RedirectLimit(NotFound):
    """The page redirects further than the crawl's ``max_redirects``: it fails for good."""


async def fetch_page(ctx: Context) -> dict[str, Any] | None:
    """The ``trawl.fetch`` task."""
    rt = runtime()
    crawl_id, url = int(ctx.data["crawl"]), str(ctx.data["url"])
    host = urls.host(url)
    robots_wait: float | None = None
    waited = 0.0  # seconds spent waiting for another page's robots.txt fetch
    tries = 3  # plans that may end in a missed start; waits for robots.txt do not count
    while tries:
        if robots_wait is not None:  # another page is fetching the host's robots.txt
            await _sleep_until(robots_wait)
            robots_wait = None
        else:
            tries -= 1
        # A request of the crawl's concurrency in this process before the gate is asked
        # (crawl/inflight.py); given back once the request is done, whatever the plan.
        permit = await rt.in_flight.acquire(crawl_id, within=PERMIT_WAIT)
        if permit is None:  # the crawl's requests are all out here, and stay out
            ctx.defer(time.time() + BUSY_RETRY * random.uniform(1.0, 2.0))
            return None
        try:
            # A page's request to a host slow to connect is begun early (crawl/setups.py),
            # so the gate holds it and wakes it that much earlier too (politeness.Ask).
            lead = rt.setups.lead(host)
            plan = await rt.port.begin(ctx, crawl_id, url, rt.take_finished(), lead)
            if plan.crawl is not None:
                rt.in_flight.limit(crawl_id, plan.crawl.concurrency)
            if (
                plan.action == "defer"
                and plan.reason == ROBOTS_PENDING
                and waited < ROBOTS_WAIT_MAX
            ):
                robots_wait = rt.port.local_time(plan.until)  # without holding the permit
                waited += max(0.0, robots_wait - time.time())
                continue  # (waited longer than that: put back in the queue, as any defer)
            if plan.action in ("park", "defer", "skip"):
                _set_aside(ctx, plan, crawl_id, url)
                return None
            start = rt.port.local_time(plan.start_at)
            # Begun by the lead it was planned with, it waits for its start in the client,
            # connected (_on_start).
            await _sleep_until(start - (lead if plan.action == "fetch" else 0))
            # The margin is half the slack the gate added to this host's spacing, which is
            # its delay with any Crawl-delay (_Ready.delay), not the crawl's delay alone. A
            # busy loop may wake us past it: the client finds that out as it sends, and the
            # request takes a new start then (pacing.Starts: this one, moved to now, when no
            # later one was reserved), rather than planning again here.
            not_after = start + latest_send(_ready(plan).delay)
            blocked = rt.blocked.get(host, 0.0)
            if blocked > time.time():  # a 429 arrived while this request waited its start
                ctx.defer(blocked)
                return None
            if plan.action == "robots":
                await _fetch_robots(ctx, rt, plan, url, not_after)
                continue
            return await _fetch(ctx, rt, plan, crawl_id, url, start, not_after, permit)
        except LateStart:
            continue  # nothing was sent: plan again, from the host's next free start
        except HostHeldOff:
            # A 429 or 503 held the host off while this request waited for a new start (its
            # connection made it late): nothing was sent and nothing failed. Planned again,
            # the gate puts the page aside until the host's hold ends.
            continue
        finally:
            permit.release()
    # Late three times (a starved process), or robots.txt kept changing: try again soon.
    ctx.defer(time.time() + 1.0)
    return None


def _set_aside(ctx: Context, plan: Plan, crawl_id: int, url: str) -> None:
    if plan.action == "park":
        ctx.custom(Parked(item_id=ctx.id))
        ctx.defer(time.time())
    elif plan.action == "defer":
        ctx.defer(plan.until)
    else:
        if plan.reason != "gone":
            record = _record(ctx, plan, crawl_id, url, time.time()) | {
                "outcome": "skipped",
                "error": plan.reason,
            }
            ctx.custom(Skipped(crawl_id=crawl_id, url=url, reason=plan.reason, record=record))
        ctx.skip()


async def _sleep_until(start: float) -> None:
    wait = start - time.time()
    if wait > 0:
        await asyncio.sleep(wait)


async def _on_start(rt: ProcessState, host: str, start: float) -> None:
    """The request, connected, waits for its start (it began early when its host is slow
    to connect); a 429 that held the host off meanwhile calls it off, nothing sent."""
    await _sleep_until(start)
    if rt.blocked.get(host, 0.0) > time.time():
        raise pacing.held_off(host)


async def _fetch_robots(
    ctx: Context, rt: ProcessState, plan: Plan, url: str, not_after: float
) -> None:
    r = _ready(plan)
    started = rt.port.permit_time(time.time())  # the next request counts from this start
    host = urls.host(url)
    first = pacing.Starts(ctx, rt, host, r.delay, plan.start_at)
    status, body = await _robots_txt(ctx, rt, r, robots_url(url), not_after, first)
    started = max(started, first.start or started)  # ... or from the start it went out on
    robots = Robots(status, body)
    wait = max(r.options.delay, capped_delay(robots, r.settings.user_agent, r.options))
    wait += slack(wait)
    await rt.port.robots_fetched(ctx, host, (status, body), started + wait)


async def _robots_txt(
    ctx: Context,
    rt: ProcessState,
    r: _Ready,
    target: str,
    not_after: float,
    first: pacing.Starts,
) -> tuple[int, str]:
    """Status and body of a host's robots.txt, following up to five redirects (RFC 9309),
    each hop spaced on its host like any request; a longer chain counts as unavailable
    (404), no answer as :data:`UNREACHABLE`. The first request goes by *not_after*, or
    on a start *first* takes."""
    headers = {"User-Agent": r.settings.user_agent}
    starts = first
    for hop in range(MAX_REDIRECTS + 1):
        try:
            if hop:  # a further request: it waits for its own start on its host
                starts = pacing.Starts(ctx, rt, urls.host(target), r.options.delay)
                not_after = await starts.take()
            resp = await client.fetch(
                rt.client(),
                target,
                headers=headers,
                timeout=r.options.timeout,
                max_bytes=MAX_BYTES,
                not_after=not_after,
                repace=starts.take,
                setup=functools.partial(rt.setups.note, urls.host(target)),
            )
        except HostHeldOff:
            raise  # not asked, so no answer to keep: the page plans again
        except FetchError:
            return UNREACHABLE, ""
        try:
            if r.options.warc:
                await rt.archive(ctx, r.crawl, resp)
            location = urls.canonical(resp.header("location") or "", target)
            if not (300 <= resp.status < 400 and location):
                return resp.status, resp.text() if resp.status < 300 else ""
            target = location
        finally:
            resp.exchange.body.close()
    return 404, ""


async def _fetch(
    ctx: Context,
    rt: ProcessState,
    plan: Plan,
    crawl_id: int,
    url: str,
    start: float,
    not_after: float,
    permit: Permit,
) -> dict[str, Any] | None:
    r = _ready(plan)
    host = urls.host(url)
    started = max(time.time(), start)  # begun early, it is sent on its start (_on_start)
    record = _record(ctx, plan, crawl_id, url, started)
    headers = {"User-Agent": r.settings.user_agent, **_cookie(r.settings), **r.settings.headers}
    ctx.allow_failure()  # a failed attempt still records itself and frees its slots
    try:
        resp = await client.fetch(
            rt.client(),
            url,
            headers=headers,
            timeout=r.options.timeout,
            max_bytes=r.options.max_bytes,
            not_after=not_after,
            repace=pacing.Starts(ctx, rt, host, r.delay, plan.start_at).take,
            ready=functools.partial(_on_start, rt, host, start),
            setup=functools.partial(rt.setups.note, host),
        )
    except HostHeldOff:
        raise  # nothing was sent: no attempt to record, no error of the host's
    except FetchError as error:
        rt.finished.append((ctx.id, ctx.attempt))
        permit.release()
        record |= {
            "outcome": "retry",
            "error": str(error),
            "elapsed": max(0.0, time.time() - started),
        }
        ctx.custom(Fetched(item_id=ctx.id, attempt=ctx.attempt, record=record))
        if await _host_backs_off(ctx, r, crawl_id, url):
            return None
        raise
    rt.finished.append((ctx.id, ctx.attempt))
    try:
        return await _handle(ctx, rt, plan, crawl_id, url, resp, record, permit)
    finally:
        resp.exchange.body.close()


async def _handle(
    ctx: Context,
    rt: ProcessState,
    plan: Plan,
    crawl_id: int,
    url: str,
    resp: Response,
    record: dict[str, Any],
    permit: Permit,
) -> dict[str, Any] | None:
    r = _ready(plan)
    chain = int(ctx.data.get("redirects", 0)) + 1 if 300 <= resp.status < 400 else 0
    too_long = chain > r.options.max_redirects
    browser = None
    if not too_long and rendering.renders(r.options, r.settings, resp):
        # A rendered page keeps its request through the render and its sub-requests: the
        # crawl's concurrency also bounds the browser's tabs, whatever the worker's slots.
        browser = await _render(ctx, rt, r, url, resp, record)
    permit.release()  # parsing and archiving need no request of the crawl's
    links = browser.links if browser is not None else None
    known = await rt.first_copy(ctx, r.crawl, resp) if r.options.warc else None

    def extract_and_archive() -> tuple[list[Found], str | None, tuple[Written, bool] | None]:
        found, cut = _found(plan, url, resp, r.options.max_links, chain, links)
        if too_long:
            found = []  # the chain ends here
        if not r.options.warc:
            return found, cut, None
        outlinks = [f.url for f in found]
        return found, cut, rt.write_exchange(r.crawl, resp, known, outlinks)

    if _small(resp):
        found, cut, archived = extract_and_archive()
    else:
        found, cut, archived = await asyncio.to_thread(extract_and_archive)
    if too_long:
        record["error"] = (
            f"redirect chain of {chain} exceeds max_redirects {r.options.max_redirects}"
        )
    payload = None
    record |= {
        "status_code": resp.status,
        "location": resp.header("location"),
        "content_type": resp.content_type or None,
        "size": resp.size,
        "elapsed": resp.elapsed,
        "outlinks": len(found),
        "outlinks_cut": cut,
        "digest": resp.exchange.digest,
        "outcome": "failed" if too_long else _outcome(resp.status),
    }
    if browser is not None:  # its time is the fetch and the render together
        record |= browser.record | {"elapsed": time.time() - record["started_at"]}
    sync = None
    if archived is not None:
        written, first = archived
        sync = rt.sync_for(r.crawl, written)
        record |= {"warc_file": written.file, "warc_offset": written.offset}
        record["warc_length"] = written.length
        if first:
            payload = (crawl_id, resp.exchange.digest, url, resp.exchange.date)
    block = block_of(resp, urls.host(url))
    if block is not None:  # at once, not at commit: requests already planned must not go
        rt.blocked[block[0]] = block[1]
        await rt.port.block(ctx, *block)
    discover = (
        Discover(crawl_id=crawl_id, parent=url, found=tuple(found), crawl=r.crawl)
        if found
        else None
    )
    ctx.custom(
        Fetched(
            item_id=ctx.id,
            attempt=ctx.attempt,
            record=record,
            block=block,
            payload=payload,
            discover=discover,
            host_ok=urls.host(url) if plan.host_errors and resp.status < 500 else None,
            subpayloads=tuple(browser.payloads) if browser is not None else (),
            sync=sync,
        )
    )
    if too_long:
        raise RedirectLimit(record["error"])
    if resp.status >= 500 and await _host_backs_off(ctx, r, crawl_id, url):
        return None
    _raise_for(resp)
    return {"status": resp.status, "size": resp.size, "links": len(found)}


async def _render(
    ctx: Context, rt: ProcessState, r: _Ready, url: str, resp: Response, record: dict[str, Any]
) -> rendering.BrowserPage:
    """Render the page; a page that cannot be captured fails this attempt (it is retried),
    recorded with the document's status."""
    try:
        return await rendering.render_page(ctx, rt, r.crawl, r.settings, url, resp, r.delay)
    except (RenderFailed, BrowserUnavailable) as error:
        record |= {
            "status_code": resp.status,
            "content_type": resp.content_type or None,
            "size": resp.size,
            "elapsed": time.time() - record["started_at"],
            "outcome": "retry",
            "error": f"browser: {error}",
        }
        ctx.custom(Fetched(item_id=ctx.id, attempt=ctx.attempt, record=record))
        raise


def _cookie(settings: Settings) -> dict[str, str]:
    if not settings.cookies:
        return {}
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in settings.cookies.items())}


@dataclass(frozen=True, slots=True)
class _Ready:
    crawl: CrawlRow
    options: Options
    settings: Settings
    delay: float  # the host's, its Crawl-delay included (the crawl's from an older tracker)


async def _host_backs_off(ctx: Context, r: _Ready, crawl_id: int, url: str) -> bool:
    """A host-level error (5xx, timeout, connection): the whole host backs off and the page
    waits for it without spending a try - until the host has failed too often in a row, or
    while the host answers other pages and this one fails again (politeness.host_failed)."""
    until = await runtime().port.host_failed(ctx, crawl_id, url, r.options.host_grace)
    if until is None:
        return False
    # Spread over the same span after the block as the host's other pages (the gate defers
    # them so): due at the block's end exactly, this page came back first every time, and
    # a page that always fails found the host's run still open, doubled its block and
    # waited again, where another page's answer in between would have shown it its own.
    ctx.defer(after_block(until, r.delay, _RNG))
    return True


def _ready(plan: Plan) -> _Ready:
    if plan.options is None or plan.settings is None or plan.crawl is None:
        raise RuntimeError(f"an incomplete plan to fetch: {plan}")
    return _Ready(plan.crawl, plan.options, plan.settings, max(plan.delay, plan.options.delay))


def _record(ctx: Context, plan: Plan, crawl_id: int, url: str, started: float) -> dict[str, Any]:
    return {
        "crawl_id": crawl_id,
        "url": url,
        "attempt": ctx.attempt,
        "ruleset": plan.ruleset.version if plan.ruleset is not None else 0,
        "host": urls.host(url),
        "started_at": started,
        "elapsed": 0.0,
        "outcome": "done",
        "status_code": None,
        "location": None,
        "content_type": None,
        "size": None,
        "outlinks": 0,
        "outlinks_cut": None,
        "error": None,
        "digest": None,
        "warc_file": None,
        "warc_offset": None,
        "warc_length": None,
    }


def _found(
    plan: Plan,
    url: str,
    resp: Response,
    max_links: int,
    chain: int,
    rendered: extract.Links | None = None,
) -> tuple[list[Found], str | None]:
    """The links to discover (*rendered*: those of the page's DOM in a browser), and why
    the page's links were cut short (if they were)."""
    assert plan.ruleset is not None
    cut = None
    if 300 <= resp.status < 400:
        target = urls.canonical(resp.header("location") or "", url)
        raw, hops = ([target] if target else []), 0
    elif 200 <= resp.status < 300 and not resp.truncated:
        links = rendered if rendered is not None else _links(url, resp, max_links)
        raw, hops, cut = links.urls, 1, links.cut
    else:
        return [], None
    skip = f"rule:{plan.ruleset.version}"
    found = [
        Found(url=link, hops=hops, skip=skip if plan.ruleset.skips(link) else None, redirects=chain)
        for link in raw
        if link != url and plan.ruleset.accepts(link)
    ]
    return found, cut


def _links(url: str, resp: Response, max_links: int) -> extract.Links:
    kind = resp.content_type
    if kind in extract.HTML_TYPES:
        return extract.html_links(resp.text().encode(), url, max_links=max_links)
    if kind == "text/css":
        return extract.css_links(resp.text(), url, max_links=max_links)
    return extract.Links([])


def _outcome(status: int) -> str:
    if status == 429 or status >= 500:
        return "retry"
    return "not-found" if 400 <= status < 500 else "done"


def _raise_for(resp: Response) -> None:
    if resp.status == 429 or resp.status >= 500:
        raise RetryableHTTP(f"HTTP {resp.status}")
    if 400 <= resp.status < 500:
        raise NotFound(f"HTTP {resp.status}")
