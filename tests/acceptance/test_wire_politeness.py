"""Politeness judged on the wire: two crawl processes share a crawl of three hosts whose
pages sometimes answer 503, drop their connection or throttle with a 429, and every
request start each host's server logs - retries, robots.txt and all - is at least the
delay after the one before. The server stamps requests with the kernel's receive time
(trawl.demo.stamps), so its own scheduling cannot make a gap look shorter than it was."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import site_crawl
from tests.support.procs import Procs, running
from trawl.crawl.options import Options
from trawl.demo.httpd import Request, Script, SiteServer
from trawl.demo.site import random_graph

pytestmark = [pytest.mark.slow, pytest.mark.timing]

DELAY = 0.1
DEPTH = 4


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def closer_than_delay(log: list[Request], host: str) -> list[tuple[Request, Request]]:
    starts = sorted((r for r in log if r.host == host), key=lambda r: r.at)
    return [(a, b) for a, b in itertools.pairwise(starts) if b.at - a.at < DELAY]


def test_every_request_start_on_each_host_keeps_the_delay_across_processes_and_retries(
    db_url: str, procs: Procs
) -> None:
    site = random_graph(400, seed=11, out_degree=3, hosts=3)
    pages = list(site.pages)
    script = Script(
        fail=dict.fromkeys(pages[3:90:6], 1),  # a 503, then the page
        reset=dict.fromkeys(pages[4:120:8], 1),  # the connection dropped, then the page
        throttle={"slow": (2, 0.5)},  # its first two requests: 429, Retry-After 0.5
    )
    with SiteServer(site, script, hosts=3) as server:
        options = Options(robots=True, delay=DELAY, timeout=5.0)
        crawl_id = site_crawl.create(db_url, server, depth=DEPTH, options=options)
        crawlers = [
            procs.trawl(
                "--db",
                db_url,
                "crawl",
                "resume",
                str(crawl_id),
                "-c",
                "8",
                "--no-progress",
                name=f"crawler-{n}",
            )
            for n in (1, 2)
        ]
        for crawler in crawlers:
            assert crawler.wait(timeout=240) == 0, crawler.describe()
        log = server.requests()
        truth = {server.url(k): d for k, d in site.truth(DEPTH + 1).items()}

    found = site_crawl.pages(db_url, crawl_id)
    assert site_crawl.fetched(found) == {u: d for u, d in truth.items() if d <= DEPTH}
    statuses = {r.status for r in log}
    assert {0, 503, 429} <= statuses, "the site dropped, failed and throttled requests"
    for host in server.labels:
        assert sum(r.host == host for r in log) >= 30, {
            h: sum(r.host == h for r in log) for h in server.labels
        }
        close = closer_than_delay(log, host)
        assert not close, f"{host}: request starts closer than {DELAY}s: {close[:5]}"
