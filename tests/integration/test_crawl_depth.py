"""Depth is the shortest discovery path, whatever order pages are fetched in and however
often they fail first: every page within the limit is fetched at its true depth, none past it.
"""

from __future__ import annotations

import random

import pytest

from tests.support import site_crawl
from trawl.crawl.options import Options
from trawl.demo.httpd import Script, SiteServer
from trawl.demo.site import generate, random_graph

NO_ROBOTS = Options(robots=False, timeout=5.0)


def test_the_shortcut_fixes_depth_when_the_short_path_fails_first(db_url: str) -> None:
    # P fails twice, so T is first found through Q -> Q2 at depth 3 (past the limit, skipped)
    # and only later through P at its true depth 2: it must then be fetched, and U stays out.
    script = Script(fail={("main", "/short/p"): 2})
    with SiteServer(generate(60), script) as server:
        crawl_id = site_crawl.create(db_url, server, depth=2, options=NO_ROBOTS)
        progress = site_crawl.run(db_url, crawl_id)
        found = site_crawl.pages(db_url, crawl_id)
        truth = server.site.truth(3)
        url = server.url
    assert progress.status == "FINISHED"
    t, u = found[url(("main", "/short/t"))], found[url(("main", "/short/u"))]
    assert (t["depth"], t["state"], t["via"]) == (2, "DONE", url(("main", "/short/p")))
    assert (u["depth"], u["state"], u["skip"]) == (3, "SKIPPED", "depth")
    expected = {url(k): d for k, d in truth.items() if d <= 2}
    assert site_crawl.fetched(found) == expected


@pytest.mark.parametrize("seed", [3, 11])
def test_random_graphs_with_transient_failures_match_the_ground_truth(
    db_url: str, seed: int
) -> None:
    site = random_graph(160, seed, out_degree=2)
    rng = random.Random(seed)
    flaky = [k for k in site.pages if k != ("main", "/") and rng.random() < 0.25]
    script = Script(
        fail={k: rng.choice((1, 2)) for k in flaky[::2]},
        reset=dict.fromkeys(flaky[1::2], 1),
    )
    with SiteServer(site, script, hosts=2) as server:
        crawl_id = site_crawl.create(db_url, server, depth=3, options=NO_ROBOTS)
        site_crawl.run(db_url, crawl_id, concurrency=8)
        found = site_crawl.pages(db_url, crawl_id)
        truth = {server.url(k): d for k, d in site.truth(4).items()}
    fetched = site_crawl.fetched(found)
    assert fetched == {u: d for u, d in truth.items() if d <= 3}
    for url, page in found.items():  # everything else found is past the limit, kept skipped
        if url not in fetched:
            assert (page["state"], page["skip"], page["depth"]) == ("SKIPPED", "depth", truth[url])
