"""A commit's discoveries, made together (discover_many), leave the frontier as the same
discoveries made one after another: depths, skips and which pages are due alike, and each
page's via a page on one of its shortest paths (of two paths as short, either may be
kept)."""

from __future__ import annotations

import random

import pytest

from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.frontier import Found, discover, discover_many
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

SEED = "http://a.test/"
Finds = list[tuple[str, list[Found]]]


def _crawl(store: Store, depth: int) -> int:
    operations.register(store, make_app().get(FETCH_TASK).info())
    spec = CrawlSpec(seeds=(SEED,), depth=depth, options=Options(robots=False))
    return operations.create(store, spec)


def _frontier(store: Store, crawl_id: int) -> dict[str, tuple[int, str | None, str | None, str]]:
    with store.read():
        pages = store.crawls.pages(crawl_id)
    return {p["url"]: (p["depth"], p["via"], p["skip"], p["status"]) for p in pages}


def _grow(store: Store, crawl_id: int, finds: Finds, *, together: bool) -> None:
    with store.write():
        if together:
            discover_many(store.crawls, crawl_id, finds, store.clock())
            return
        for parent, found in finds:
            discover(store.crawls, crawl_id, parent, found, store.clock())


def _url(n: int) -> str:
    return SEED if n == 0 else f"{SEED}p{n}"


def _random_finds(rng: random.Random, known: list[str], pages: int) -> Finds:
    finds: Finds = []
    for parent in rng.sample(known, min(len(known), rng.randint(1, 6))):
        found = [
            Found(url=_url(rng.randrange(pages)), hops=rng.choice((0, 1, 1, 1)))
            for _ in range(rng.randint(1, 5))
        ]
        finds.append((parent, found))
    return finds


def test_the_worked_example_lowers_and_brings_back_pages_as_one_by_one(store: Store) -> None:
    crawls = [_crawl(store, depth=3) for _ in range(2)]
    p1, p2, x, y, z, a, b = (_url(n) for n in range(1, 8))
    for crawl_id in crawls:  # P1 at 1; P2 at 3 through a and b; X at 4, past the limit
        _grow(store, crawl_id, [(SEED, [Found(url=p1), Found(url=a)])], together=False)
        _grow(store, crawl_id, [(a, [Found(url=b)]), (b, [Found(url=p2)])], together=False)
        _grow(store, crawl_id, [(p2, [Found(url=x)])], together=False)
    batch = [(p2, [Found(url=x), Found(url=y), Found(url=z)]), (p1, [Found(url=y), Found(url=p2)])]
    _grow(store, crawls[0], batch, together=True)
    _grow(store, crawls[1], batch, together=False)
    together, alone = _frontier(store, crawls[0]), _frontier(store, crawls[1])
    assert together == alone
    assert together[p2][:2] == (2, p1), "P1's shortcut lowered P2"
    assert together[x][:3] == (3, p2, None), "and P2's children with it, back within the limit"
    assert together[y][:2] == (2, p1)
    assert together[z][:3] == (3, p2, None)


@pytest.mark.parametrize("seed", range(6))
def test_random_batches_leave_the_frontier_as_one_by_one(store: Store, seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice((2, 3, 4))
    crawls = [_crawl(store, depth=limit) for _ in range(2)]
    pages = 40
    for _ in range(8):
        known = sorted(_frontier(store, crawls[1]))
        finds = _random_finds(rng, known, pages)
        _grow(store, crawls[0], finds, together=True)
        _grow(store, crawls[1], finds, together=False)
        together, alone = _frontier(store, crawls[0]), _frontier(store, crawls[1])
        assert _without_via(together) == _without_via(alone)
        _assert_vias_on_shortest_paths(store, crawls[0], together)


def _without_via(
    frontier: dict[str, tuple[int, str | None, str | None, str]],
) -> dict[str, tuple[int, str | None, str]]:
    return {url: (depth, skip, status) for url, (depth, _, skip, status) in frontier.items()}


def _assert_vias_on_shortest_paths(
    store: Store, crawl_id: int, frontier: dict[str, tuple[int, str | None, str | None, str]]
) -> None:
    with store.read():
        links = store.crawls.children(crawl_id, sorted(frontier))
    hops = {(parent, child): h for parent, child, h, _ in links}
    for url, (depth, via, _, _) in frontier.items():
        if via is None:
            assert depth == 0, f"{url} has no via but depth {depth}"
            continue
        assert frontier[via][0] + hops[(via, url)] == depth, f"{url} via {via}"
        assert (
            min(frontier[p][0] + h for (p, c), h in hops.items() if c == url and p in frontier)
            == depth
        ), f"{url} is not at its shortest depth"
