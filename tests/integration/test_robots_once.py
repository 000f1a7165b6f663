"""A host's robots.txt is fetched once, however many of its pages a crawl finds at once.

A page that links to many pages of a host the crawl has not seen yet makes that many fetch
attempts due together, and none of them knows the host's robots.txt. One of them fetches
it; the others wait for it (a short deferral) instead of each fetching it too, a delay
apart, which wasted requests and put duplicate records in the WARC.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support import site_crawl
from trawl.crawl.options import Options
from trawl.demo.httpd import SiteServer
from trawl.demo.site import random_graph

pytestmark = pytest.mark.slow


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
