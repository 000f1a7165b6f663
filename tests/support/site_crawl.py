"""Crawling a generated site in-process for tests: create the crawl, run it to the end,
and read back its pages and attempts."""

from __future__ import annotations

import asyncio
import contextlib
import io
import multiprocessing
import time
from typing import Any

from trawl.cli.crawlview import page_json
from trawl.crawl import foreground, operations
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec, Progress
from trawl.crawl.options import Options
from trawl.demo.httpd import SiteServer
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
