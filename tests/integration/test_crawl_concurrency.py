"""A crawl's concurrency is requests in flight, read off the server: a worker with more
slots than that (as `trawl crawl` runs one) sends no more, and keeps the surplus for
pages being parsed and committed instead of planning fetches the gate would refuse."""

from __future__ import annotations

import pytest

from tests.support import site_crawl
from trawl.crawl.inflight import SLOTS_PER_REQUEST
from trawl.crawl.options import Options
from trawl.demo.httpd import Script, SiteServer
from trawl.demo.site import random_graph
from trawl.store.sql import q
from trawl.store.store import Store


def _attempts(url: str) -> set[int]:
    with Store(url) as store:
        rows = store.db.execute(q("SELECT attempt FROM jobs WHERE task = 'trawl.fetch'"))
        return {row.attempt for row in rows}


@pytest.mark.parametrize("concurrency", [1, 3])
def test_requests_in_flight_reach_the_concurrency_and_never_pass_it(
    db_url: str, concurrency: int
) -> None:
    site = random_graph(80, seed=7, out_degree=4)
    with SiteServer(site, Script(latency=0.03), hosts=2) as server:
        options = Options(timeout=5.0)
        crawl_id = site_crawl.create(
            db_url, server, depth=8, options=options, concurrency=concurrency
        )
        progress = site_crawl.run(db_url, crawl_id, concurrency=concurrency * SLOTS_PER_REQUEST)
    assert progress.status == "FINISHED"
    assert progress.done == len(site.truth(8))
    assert server.busiest == concurrency, f"at most {server.busiest} requests answered at once"
    # No page was deferred for want of a request slot: each job ran one attempt.
    assert _attempts(db_url) == {1}


def test_on_a_slow_site_pages_beyond_the_concurrency_step_back_and_all_are_fetched(
    sqlite_url: str,
) -> None:
    # Each answer takes longer than a fetch waits for a request (politeness.HOLD): the
    # pages queued behind the one request out are deferred, not timed out, and come back.
    site = random_graph(6, seed=3, out_degree=3)
    with SiteServer(site, Script(latency=1.2), hosts=2) as server:
        options = Options(robots=False, timeout=5.0)
        crawl_id = site_crawl.create(sqlite_url, server, depth=8, options=options, concurrency=1)
        progress = site_crawl.run(sqlite_url, crawl_id, concurrency=4)
    assert progress.status == "FINISHED"
    assert progress.done == len(site.truth(8))
    assert progress.failed == 0
    assert server.busiest == 1
    assert max(_attempts(sqlite_url)) > 1, "no page waited long enough to step back"
