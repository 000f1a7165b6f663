"""A crawl pipeline's claims route over the crawls read at most once a FRESH, per routing."""

from __future__ import annotations

from tests.integration.helpers import fetch_routing
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.server.pipelines.routed import RoutedCrawls
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store


def _crawl(store: Store, n: int, niceness: int = 0) -> int:
    seeds = (f"http://h{n}.test/",)
    spec = CrawlSpec(seeds=seeds, options=Options(robots=False), niceness=niceness)
    return operations.create(store, spec)


def test_the_crawls_are_read_again_once_stale(store: Store) -> None:
    operations.register(store, make_app().get(FETCH_TASK).info())
    now = [100.0]
    routed = RoutedCrawls(fresh=1.0, clock=lambda: now[0])
    routing = fetch_routing([])
    first = _crawl(store, 1)
    assert routed.of(store, routing).crawls == [first]
    second = _crawl(store, 2)
    now[0] += 0.5
    assert routed.of(store, routing).crawls == [first], "reused within its second"
    now[0] += 0.5
    assert routed.of(store, routing).crawls == [first, second]


def test_a_new_routing_reads_the_crawls_at_once(store: Store) -> None:
    operations.register(store, make_app().get(FETCH_TASK).info())
    routed = RoutedCrawls(fresh=60.0, clock=lambda: 0.0)
    plain = _crawl(store, 1)
    assert routed.of(store, fetch_routing([])).crawls == [plain]
    browser = operations.create(
        store, CrawlSpec(seeds=("http://b.test/",), options=Options(browser=True))
    )
    assert routed.of(store, fetch_routing(["browser"])).crawls == [plain, browser]


def test_aborted_and_paused_crawls_are_left_out_and_the_best_comes_first(store: Store) -> None:
    operations.register(store, make_app().get(FETCH_TASK).info())
    routed = RoutedCrawls(fresh=0.0)  # read at every claim
    routing = fetch_routing([])
    old, aborted, paused = _crawl(store, 1), _crawl(store, 2), _crawl(store, 3)
    urgent = _crawl(store, 4, niceness=-5)
    operations.abort(store, aborted)
    operations.set_concurrency(store, paused, 0)
    got = routed.of(store, routing)
    assert got.crawls == [urgent, old]
    assert got.pinned == []
