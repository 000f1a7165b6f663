"""A host's robots.txt is fetched once, however many of its pages a crawl finds at once.

A page that links to many pages of a host the crawl has not seen yet makes that many fetch
attempts due together, and none of them knows the host's robots.txt. One of them fetches
it; the others wait for it (a short deferral) instead of each fetching it too, a delay
apart, which wasted requests and put duplicate records in the WARC. The others wait only
while the fetching page's job runs the attempt that fetches it: a page that gave up (its
starts missed three times) leaves the fetch to the next page, at once.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tests.support import site_crawl
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.frontier import Found, discover
from trawl.crawl.options import Options
from trawl.crawl.politeness import ROBOTS_PENDING, Gate, Plan
from trawl.crawl.urls import page_id
from trawl.demo.httpd import SiteServer
from trawl.demo.site import random_graph
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store


@pytest.mark.slow
def test_each_hosts_robots_txt_is_fetched_once(db_url: str) -> None:
    # Three hosts, every page linking to ten others: each new host turns up through many
    # links in one page's outlinks.
    site = random_graph(240, seed=5, out_degree=10, hosts=3)
    with SiteServer(site, hosts=3) as server:
        options = Options(robots=True, delay=0.02, timeout=5.0)
        crawl_id = site_crawl.create(db_url, server, depth=3, options=options)
        site_crawl.run(db_url, crawl_id, concurrency=8)
        log = server.requests()
        truth = {server.url(k): d for k, d in site.truth(4).items()}

    robots = Counter(r.host for r in log if r.path == "/robots.txt")
    assert robots == dict.fromkeys(server.labels, 1), robots
    found = site_crawl.pages(db_url, crawl_id)
    assert site_crawl.fetched(found) == {u: d for u, d in truth.items() if d <= 3}


def test_a_page_that_gave_up_its_robots_fetch_leaves_it_to_the_next(store: Store) -> None:
    """Before, the others waited until the fetch could have ended (the request timeout and
    a margin: 20 s here, 45 s by default), each put back in the queue after 5 s of it: a
    crawl at --delay 0.02 on PostgreSQL, where a busy event loop missed the fetching page's
    starts, took 19-23 s instead of 3 s."""
    seed = "http://a.test/"
    pages = [f"{seed}{n}" for n in range(3)]
    operations.register(store, make_app().get(FETCH_TASK).info())
    options = Options(robots=True, delay=0.2, timeout=5.0)  # a second start within HOLD
    crawl_id = operations.create(store, operations.CrawlSpec(seeds=(seed,), options=options))
    with store.write():
        discover(store.crawls, crawl_id, seed, [Found(url=u) for u in pages], store.clock())
    first, second = (page_id(crawl_id, u) for u in pages[:2])
    _run(store, first, 1)
    _run(store, second, 1)
    gate = Gate(random.Random(1))

    def plan(item_id: str, attempt: int) -> Plan:
        url = pages[[first, second].index(item_id)]
        return gate.begin(store, crawl_id, url, item_id, attempt, [])

    assert plan(first, 1).action == "robots"
    waiting = plan(second, 1)
    assert (waiting.action, waiting.reason) == ("defer", ROBOTS_PENDING)
    with store.write():  # the first page missed its start three times: back in the queue
        store.db.send(f"UPDATE jobs SET status = 'queued' WHERE item_id = '{first}'")
    assert plan(second, 1).action == "robots"
    _run(store, first, 2)  # claimed again: now it waits for the second's fetch
    again = plan(first, 2)
    assert (again.action, again.reason) == ("defer", ROBOTS_PENDING)


def _run(store: Store, item_id: str, attempt: int) -> None:
    """The page's fetch job running *attempt*, as after a claim."""
    with store.write():
        store.db.send(
            f"UPDATE jobs SET status = 'running', attempt = {attempt}, due_at = 1e12"
            f" WHERE item_id = '{item_id}'"
        )
