"""Crawling a generated site in-process for tests: create the crawl, run it to the end,
and read back its pages and attempts."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import multiprocessing
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from trawl.cli.crawlview import page_json
from trawl.crawl import foreground, operations
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec, Progress
from trawl.crawl.options import Options
from trawl.demo.httpd import Request, Script, SiteServer
from trawl.demo.site import Site
from trawl.store import migrate
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store


def create(url: str, server: SiteServer | None, **spec: Any) -> int:
    """A crawl of *server*'s site from its main page, or of ``seeds=`` given."""
    options = spec.pop("options", Options())
    seeds = spec.pop("seeds", None)
    if seeds is None:
        assert server is not None, "a crawl needs a site or seeds"
        seeds = (server.url(("main", "/")),)
    with Store(url) as store:
        migrate.ensure(store.db, auto=store.is_sqlite)
        operations.register(store, make_app().get(FETCH_TASK).info())
        return operations.create(store, CrawlSpec(seeds=seeds, options=options, **spec))


HANG = 240.0  # a test crawl still running this long is stuck: say where (below pytest's 300)


def run(url: str, crawl_id: int, *, concurrency: int = 8, lease: float = 30.0) -> Progress:
    return asyncio.run(_watched(url, crawl_id, concurrency=concurrency, lease=lease))


async def _watched(url: str, crawl_id: int, *, concurrency: int, lease: float) -> Progress:
    """The crawl, or after :data:`HANG` seconds an error that shows where it stands: the
    pages not yet done and what each task of the loop awaits (pytest-timeout shows only the
    threads, and a stuck crawl's threads are all idle)."""
    crawl = asyncio.create_task(foreground.run(url, crawl_id, concurrency=concurrency, lease=lease))
    done, _ = await asyncio.wait([crawl], timeout=HANG)
    if done:
        return crawl.result()
    report = [f"the crawl ran {HANG:g} s and had not finished", *_open_pages(url, crawl_id)]
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            stack = io.StringIO()
            task.print_stack(limit=12, file=stack)
            report.append(stack.getvalue())
    crawl.cancel()
    with contextlib.suppress(BaseException):
        await crawl
    raise AssertionError("\n".join(report))


def _open_pages(url: str, crawl_id: int) -> list[str]:
    now = time.time()
    with Store(url) as store:
        rows = sorted(store.crawls.pages(crawl_id), key=lambda r: (r["status"], r["due_at"]))
    return [
        f"  {r['url']} {r['status']} attempt {r['attempt']} due in {r['due_at'] - now:.1f} s"
        for r in rows
        if r["status"] not in ("done", "failed", "skipped")
    ][:40]


def run_elsewhere(url: str, crawl_id: int, *, concurrency: int = 8) -> Progress:
    """:func:`run` in a process of its own, so the site server (a thread of this process)
    stamps requests as they arrive rather than when the crawler lets go of the GIL: for
    tests that judge timing from the server's log."""
    child = multiprocessing.get_context("spawn").Process(
        target=run, args=(url, crawl_id), kwargs={"concurrency": concurrency}
    )
    child.start()
    child.join(timeout=300)
    assert child.exitcode == 0, f"the crawl process ended with {child.exitcode}"
    with Store(url) as store:
        return operations.progress(store, crawl_id)


def pages(url: str, crawl_id: int) -> dict[str, dict[str, Any]]:
    with Store(url) as store:
        return {r["url"]: page_json(r) for r in store.crawls.pages(crawl_id)}


def attempts(url: str, crawl_id: int) -> list[dict[str, Any]]:
    with Store(url) as store:
        return store.crawls.attempts(crawl_id)


def fetched(found: dict[str, dict[str, Any]]) -> dict[str, int]:
    """url -> depth of the pages that were fetched (done, or failed for good)."""
    return {u: p["depth"] for u, p in found.items() if p["state"] in ("DONE", "FAILED")}


@dataclass(frozen=True, kw_only=True)
class Served:
    """A crawl run to its end on a SiteServer: what the server logged, and the truth."""

    crawl_id: int
    log: list[Request]
    truth: dict[str, int]  # url -> true depth, a level past the crawl's


def crawl_served(
    url: str,
    site: Site,
    options: Options,
    *,
    script: Script | None = None,
    hosts: int = 1,
    depth: int = 3,
    concurrency: int = 4,
) -> Served:
    """Crawl *site*, served on *hosts* hosts (scripted by *script*), from its main page."""
    with SiteServer(site, script, hosts=hosts) as server:
        crawl_id = create(url, server, depth=depth, options=options)
        run(url, crawl_id, concurrency=concurrency)
        log = server.requests()
        truth = {server.url(k): d for k, d in site.truth(depth + 1).items()}
    return Served(crawl_id=crawl_id, log=log, truth=truth)


def check_exact_once_spaced(url: str, served: Served, depth: int, delay: float) -> None:
    """Every page within *depth* fetched and none beyond, each URL requested once, and no
    two request starts on a host closer than *delay*, as the server logged them."""
    found = pages(url, served.crawl_id)
    assert fetched(found) == {u: d for u, d in served.truth.items() if d <= depth}
    assert all(n == 1 for n in Counter((r.host, r.path) for r in served.log).values())
    for host in {r.host for r in served.log}:
        starts = sorted(r.at for r in served.log if r.host == host)
        close = [b - a for a, b in itertools.pairwise(starts) if b - a < delay]
        assert not close, f"{host}: request starts closer than {delay}s: {close}"
