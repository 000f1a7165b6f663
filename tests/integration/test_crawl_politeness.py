"""Politeness read off the server's request log: request starts on one host never closer
than the delay; a host answering 429 + Retry-After waits that long while the others go on."""

from __future__ import annotations

import itertools

import pytest

from tests.support import site_crawl
from trawl.crawl.options import Options
from trawl.demo.httpd import Script, SiteServer
from trawl.demo.site import random_graph

pytestmark = pytest.mark.timing  # judges time: runs alone (scripts/check)

DELAY = 0.12
SLACK = 0.003  # the server's clock reads a request a little after it was sent


def test_delay_per_host_and_a_throttled_host_waits_while_others_go_on(sqlite_url: str) -> None:
    site = random_graph(60, seed=5, out_degree=3)
    script = Script(throttle={"aux": (1, 1.5)})  # the first request to aux gets 429, 1.5 s
    with SiteServer(site, script, hosts=2) as server:
        options = Options(robots=False, delay=DELAY, timeout=5.0)
        crawl_id = site_crawl.create(sqlite_url, server, depth=6, options=options)
        progress = site_crawl.run_elsewhere(sqlite_url, crawl_id, concurrency=8)
        log = server.requests()
    assert progress.status == "FINISHED"
    assert progress.done == len(site.truth(6))
    for host in ("main", "aux"):
        starts = sorted((r for r in log if r.host == host), key=lambda r: r.at)
        close = [(a, b) for a, b in itertools.pairwise(starts) if b.at - a.at < DELAY - SLACK]
        assert not close, f"{host}: request starts closer than {DELAY}s: {close}"
    throttled = next(r for r in log if r.status == 429)
    after = [r.at for r in log if r.host == "aux" and r.at > throttled.at]
    assert min(after) - throttled.at >= 1.5 - SLACK, "the throttled host was asked again early"
    meanwhile = [r for r in log if r.host == "main" and throttled.at < r.at < throttled.at + 1.5]
    assert len(meanwhile) >= 5, "the other host did not go on while one was throttled"
