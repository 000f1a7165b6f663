"""A remote pipeline's page that always fails, on a host that serves its other pages,
spends its tries and ends (crawl.host_failed carries the page to the tracker): the same
rule as a local crawl's (tests/integration/test_bad_page.py)."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.test_pipelines import create_pipeline, serve
from tests.acceptance.test_remote_crawl import crawler, settled
from tests.support import pg, site_crawl
from tests.support.procs import Procs, running, wait_for
from trawl.crawl.options import Options
from trawl.demo.httpd import Script, SiteServer
from trawl.demo.site import random_graph

pytestmark = pytest.mark.slow

DEPTH = 3


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def test_a_pipelines_page_that_always_fails_spends_its_tries(
    db_url: str, tmp_path: Path, procs: Procs
) -> None:
    site = random_graph(150, seed=5, out_degree=5, hosts=1)
    # Linked from the main page, so it first fails while the host has pages left to serve
    # (a page failing alone on a host that answers nothing else looks like an outage).
    bad = site.pages[("main", "/")].links[0]
    site.pages[bad].links.clear()  # never served: the truth has no pages through it
    port = pg.free_port()
    token = create_pipeline(procs, db_url, "p1")
    with SiteServer(site, Script(fail={bad: 10**6}), hosts=1) as server:
        # An hour's grace: were the page's errors taken for its host's, it would wait
        # without spending a try for as long as that, and the crawl would not settle.
        options = Options(robots=False, timeout=5.0, host_grace=3600.0)
        crawl_id = site_crawl.create(db_url, server, depth=DEPTH, options=options)
        serve(procs, db_url, port)
        worker = crawler(procs, port, "p1", token, tmp_path / "warc")
        wait_for(lambda: settled(db_url, crawl_id), "the crawl to settle", 120, interval=0.5)
        asked = Counter(r.path for r in server.requests())
        truth = {server.url(k): d for k, d in site.truth(DEPTH + 1).items()}
        url = server.url(bad)
    worker.send(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.describe()

    found = site_crawl.pages(db_url, crawl_id)
    assert site_crawl.fetched(found) == {u: d for u, d in truth.items() if d <= DEPTH}
    assert {u for u, p in found.items() if p["state"] == "FAILED"} == {url}
    # Its tries, and a few waits (see tests/integration/test_bad_page.py).
    assert 4 <= asked[bad[1]] <= 20, asked[bad[1]]
