"""The shared feed: one look at the database per tick however many pages watch, only
changed pieces sent, the journal's new entries counted into rates, and a database that
goes away shown on the pages while the feed keeps going."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tests.api.conftest import make_tokens
from tests.dashboard import seed
from tests.dashboard.conftest import run_async
from trawl.runtime.dbmetrics import DbMetrics
from trawl.server.dashboard import figures, pieces
from trawl.server.dashboard.feed import BUCKET, Feed, Rates, Subscriber, crawl_topic
from trawl.server.dashboard.pieces import render
from trawl.server.stores import Stores
from trawl.store.activity import JournalFlow
from trawl.store.store import Store

T = TypeVar("T")


def _run(db: str, body: Callable[[Feed], Awaitable[T]]) -> T:
    """*body* with a started feed over *db* (refreshing every 50 ms), stopped after."""

    async def main() -> T:
        stores = Stores(db, 2)
        feed = Feed(stores, DbMetrics(cache_seconds=0.0), render, refresh=0.05)
        await feed.start()
        try:
            return await body(feed)
        finally:
            await feed.stop()
            stores.close()

    return run_async(main)


async def _until(
    subscriber: Subscriber, event: str, within: float = 10.0, showing: str = ""
) -> str:
    """The next piece *event* sent to *subscriber* (that contains *showing*)."""
    async with asyncio.timeout(within):
        while True:
            pieces, _ = await subscriber.wait(1.0)
            if showing in pieces.get(event, "\0"):
                return pieces[event]


def test_many_watchers_cost_one_read_and_get_the_same_text(db_url: str) -> None:
    make_tokens(db_url)  # registers price and stock

    async def body(feed: Feed) -> None:
        pages = [feed.subscribe("overview") for _ in range(50)]
        first = await _until(pages[0], "tasks")
        reads = feed.reads
        texts = [await _until(p, "tasks") if p is not pages[0] else first for p in pages]
        assert all(t is first for t in texts)  # rendered once, the same object for all
        assert "price" in first
        await asyncio.sleep(0.3)
        # a few ticks, one read each, not one per watcher
        assert feed.reads - reads < 15
        assert feed.watchers("overview") == 50
        for p in pages:
            feed.unsubscribe(p)
        assert feed.watchers("overview") == 0

    _run(db_url, body)


def test_only_changed_pieces_are_sent_again(db_url: str) -> None:
    make_tokens(db_url)

    async def body(feed: Feed) -> None:
        page = feed.subscribe("overview")
        await _until(page, "tasks")
        sent, reads = 0, feed.reads
        for _ in range(8):  # ticks of an idle database
            await feed.ticked()
            pieces, _ = await page.wait(0.0)
            sent += "tasks" in pieces
        assert feed.reads - reads >= 8
        assert sent <= 1  # at most once, when the rate chart moves on to a new bucket
        seed.failed(feed.stores.url, "sku:1")
        await _until(page, "tasks", showing='data-count="failed">1<')

    _run(db_url, body)


def test_a_late_watcher_gets_the_last_pieces_at_once(db_url: str) -> None:
    make_tokens(db_url)

    async def body(feed: Feed) -> None:
        first = feed.subscribe("overview")
        text = await _until(first, "tasks")
        late = feed.subscribe("overview")
        pieces, _ = await late.wait(0.0)
        assert pieces["tasks"] == text

    _run(db_url, body)


def test_journal_watchers_get_new_entries_and_rates_count_finished_jobs(db_url: str) -> None:
    make_tokens(db_url)

    async def body(feed: Feed) -> None:
        page = feed.subscribe("journal")
        await asyncio.sleep(0.2)  # the feed has taken its starting seq
        seed.failed(feed.stores.url, "sku:1")
        async with asyncio.timeout(10):
            kinds: list[str] = []
            while "job.failed" not in kinds:
                _, entries = await page.wait(1.0)
                kinds += [e.kind for e in entries]
        # the failed job is counted in the rate of its task, in the bucket it fell in
        later = time.time() + BUCKET  # as if the current bucket had ended
        async with asyncio.timeout(10):
            while sum(feed.rates.series("price", later)) == 0:
                await feed.ticked()
        assert sum(feed.rates.series("price", later)) == 1 / BUCKET
        assert sum(feed.rates.series("stock", later)) == 0

    _run(db_url, body)


def test_a_crawl_topic_is_read_only_while_watched(db_url: str) -> None:
    make_tokens(db_url)
    from tests.dashboard.test_pages import _crawl_in

    crawl_id = _crawl_in(db_url)

    async def body(feed: Feed) -> None:
        page = feed.subscribe(crawl_topic(crawl_id))
        counts = await _until(page, "counts")
        assert 'data-count="ready">2<' in counts
        feed.unsubscribe(page)
        assert feed.watchers(crawl_topic(crawl_id)) == 0

    _run(db_url, body)


def test_an_unreachable_database_is_shown_and_the_feed_keeps_going() -> None:
    url = "postgresql://postgres@127.0.0.1:1/nothing"  # nothing listens on port 1

    async def body(feed: Feed) -> None:
        page = feed.subscribe("overview")
        alert = await _until(page, "alert", within=30)
        assert "cannot read the database" in alert
        assert feed.last_error is not None
        reads = feed.reads
        async with asyncio.timeout(30):
            await feed.ticked()  # it tries again, not dies
        assert feed.reads > reads
        assert feed.running

    _run(url, body)


def test_stopping_the_feed_ends_every_stream() -> None:
    async def main() -> None:
        stores = Stores("postgresql://postgres@127.0.0.1:1/nothing", 1)
        feed = Feed(stores, DbMetrics(), render, refresh=60)
        await feed.start()
        page = feed.subscribe("overview")
        await feed.stop()
        assert page.closed
        assert not feed.running

    run_async(main)


def test_rates_are_finished_jobs_per_second_in_buckets() -> None:
    rates = Rates(started=1000.0)
    flow = JournalFlow(
        last=9, counts={("price", "job.done"): 30, ("price", "job.failed"): 10, (None, "log"): 5}
    )
    rates.add(1005.0, flow)
    rates.add(1012.0, JournalFlow(last=10, counts={("price", "item.created"): 99}))
    assert rates.rate("price", 1012.0) == 40 / BUCKET  # the last finished bucket
    assert rates.series("price", 1025.0) == [40 / BUCKET, 0.0]
    assert rates.series("stock", 1025.0) == [0.0, 0.0]
    assert rates.rate("price", 1035.0) == 0.0


def test_a_page_never_waits_for_the_gauges(db_url: str) -> None:
    """Before the first reading a page says the counts are coming (the feed sends them)."""
    make_tokens(db_url)
    with Store(db_url) as store:
        gauges = DbMetrics()
        view = figures.overview(store, gauges, wait=False)
        assert view.snapshot is None
        assert "Reading the database's counts" in pieces.overview(view, Rates(0.0))["summary"]
        assert not figures.crawl_list(store, gauges, wait=False).counted
        figures.overview(store, gauges)  # the feed's read
        assert figures.overview(store, gauges, wait=False).snapshot is gauges.last


def test_the_journal_tail_misses_no_entry_and_repeats_none(db_url: str) -> None:
    make_tokens(db_url)

    async def body(feed: Feed) -> list[int]:
        page = feed.subscribe("journal")
        await feed.ticked()  # the feed has taken its starting seq
        for n in range(5):  # one or several entries per tick
            seed.aliased(feed.stores.url, f"sku:{n}", f"ean:{n}")
            if n % 2:
                await feed.ticked()
        seqs: list[int] = []
        async with asyncio.timeout(10):
            while True:  # until a tick brings nothing more
                await feed.ticked()
                _, entries = await page.wait(0.0)
                if not entries:
                    return seqs
                seqs += [e.seq for e in entries]

    seqs = _run(db_url, body)
    with Store(db_url) as store:
        wanted = [e.seq for e in store.journal(0, 1000) if e.kind != "task.registered"]
    assert seqs == wanted


def test_a_crawl_pages_first_view_counts_from_fresh_gauges(db_url: str) -> None:
    """The cached gauges spare a page counting 100,000 pages; without them (the feed, or
    right after an action) the pages are counted now."""
    from tests.dashboard.test_pages import _crawl_in
    from trawl.crawl import operations

    crawl_id = _crawl_in(db_url)
    with Store(db_url) as store:
        gauges = DbMetrics(cache_seconds=60)
        assert figures.crawl(store, crawl_id, gauges).progress.ready == 2  # no reading: counted
        gauges.refresh(store)
        operations.abort(store, crawl_id)
        cached = figures.crawl(store, crawl_id, gauges).progress
        exact = figures.crawl(store, crawl_id).progress
    assert (cached.ready, cached.parked, cached.status) == (2, 0, "ABORTED")
    assert (exact.ready, exact.parked, exact.status) == (0, 2, "ABORTED")
