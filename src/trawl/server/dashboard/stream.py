"""The Server-Sent Events each live page listens to: what the shared feed sends for its
topic, plus, on the journal page, the new entries its filters keep."""

from __future__ import annotations

from collections.abc import AsyncIterator

from litestar.response import ServerSentEvent, ServerSentEventMessage

from trawl.crawl import operations
from trawl.server import cursors
from trawl.server.dashboard.feed import Feed, crawl_topic
from trawl.server.dashboard.handlers import view
from trawl.server.dashboard.journal import Filter, Filters, filters
from trawl.server.dashboard.render import fragment
from trawl.server.stores import Stores

KEEPALIVE = 15.0  # seconds: a comment line so proxies keep an idle stream open


async def events(
    feed: Feed, topic: str, keep: Filters | None = None
) -> AsyncIterator[ServerSentEventMessage]:
    subscriber = feed.subscribe(topic)
    try:
        while not subscriber.closed:
            pieces, entries = await subscriber.wait(KEEPALIVE)
            for event, text in pieces.items():
                yield ServerSentEventMessage(event=event, data=text)
            kept = [e for e in entries if keep.keep(e)] if keep is not None else []
            if kept:  # newest first, as the table lists them
                rows = fragment("pieces/journal_rows.html", entries=kept[::-1], show_item=True)
                yield ServerSentEventMessage(event="entries", data=rows)
            if not pieces and not entries:
                yield ServerSentEventMessage(comment="keep-alive")
    finally:
        feed.unsubscribe(subscriber)


@view("/ui/live/overview")
async def overview(feed: Feed) -> ServerSentEvent:
    return ServerSentEvent(events(feed, "overview"))


@view("/ui/live/crawls")
async def crawls(feed: Feed) -> ServerSentEvent:
    return ServerSentEvent(events(feed, "crawls"))


@view("/ui/live/crawls/{crawl_id:int}")
async def crawl(feed: Feed, stores: Stores, crawl_id: cursors.PathId) -> ServerSentEvent:
    await stores.run(lambda s: operations.get(s, crawl_id))  # a 404 now, not a feed error
    return ServerSentEvent(events(feed, crawl_topic(crawl_id)))


@view("/ui/live/journal")
async def journal(
    feed: Feed, kind: Filter = "", task: Filter = "", item: Filter = ""
) -> ServerSentEvent:
    return ServerSentEvent(events(feed, "journal", filters(kind, task, item)))


ROUTES = [overview, crawls, crawl, journal]
