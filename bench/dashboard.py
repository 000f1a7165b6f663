"""How long each dashboard page takes at scale: a million items and a 100,000-page crawl.

    .venv/bin/python bench/dashboard.py [--db URL] [--items N] [--pages N] [--keep]

Seeds the database in bulk (items through ``Store.add_items``, the crawl's pages through
the crawler's own ``discover``, then fetch states, attempts and failures written in bulk
as a finished crawl would have left them), starts ``trawl serve``'s application on
uvicorn, signs in, and times every page: the first request (cold: the cached gauges are
read then) and the median and worst of the next five. Also times what the shared feed
reads per tick for the overview and for a watched crawl.
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import tempfile
import threading
import time
from typing import Any
from urllib.parse import quote

import httpx
import uvicorn

from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.frontier import Found, discover
from trawl.model.records import NewItem, TaskInfo
from trawl.runtime.dbmetrics import DbMetrics
from trawl.server.app import create_app
from trawl.server.dashboard import figures
from trawl.store import migrate
from trawl.store.crawls import FETCH_TASK
from trawl.store.sql import q
from trawl.store.store import Store

BATCH = 10_000
PARENTS = 300  # pages per depth whose links make the next depth
HOSTS = [f"host{n}.example" for n in range(40)]


def seed_items(store: Store, count: int) -> None:
    store.register_tasks(
        [TaskInfo(name="price", version="1", tags=("product",), ttl=86400.0, timeout=60, retries=3)]
    )
    for start in range(0, count, BATCH):
        batch = [
            NewItem(
                id=f"sku:{n}",
                tags=(("product", None),),
                data={"n": n, "title": f"product {n}"},
            )
            for n in range(start, min(start + BATCH, count))
        ]
        store.add_items(batch, created_by="bench")
        print(f"\r  items: {start + len(batch):,}", end="", flush=True)
    print()


def seed_crawl(store: Store, pages: int) -> int:
    operations.register(store, make_app().get(FETCH_TASK).info())
    seed = f"http://{HOSTS[0]}/"
    spec = operations.CrawlSpec(seeds=(seed,), depth=8, note="bench")
    crawl_id = operations.create(store, spec)
    parents, made, depth = [seed], 1, 0
    while made < pages:
        depth += 1
        width = min(pages - made, 10**depth if depth < 5 else pages)  # 10, 100, ..., the rest
        children = [
            f"http://{HOSTS[(made + i) % len(HOSTS)]}/d{depth}/p{made + i}" for i in range(width)
        ]
        per = max(1, len(children) // len(parents))
        for i, parent in enumerate(parents):
            chunk = (
                children[i * per : (i + 1) * per] if i < len(parents) - 1 else children[i * per :]
            )
            for start in range(0, len(chunk), BATCH):
                with store.write():
                    found = [Found(url=u) for u in chunk[start : start + BATCH]]
                    discover(store.crawls, crawl_id, parent, found, store.clock())
        # the next level hangs off a few hundred of these: one write per parent, as a
        # fetch commits its page's links, and PostgreSQL pays a round trip for each
        parents, made = children[:: max(1, len(children) // PARENTS)], made + width
        print(f"\r  pages: {made:,} (depth {depth})", end="", flush=True)
    print()
    return crawl_id


def finish_pages(store: Store, crawl_id: int) -> None:
    """Fetch states as a crawl part-way through leaves them: most done, some failed, and
    an attempt for each fetched page (the last few hundred in the last half minute)."""
    now = store.clock()
    with store.write():
        store.db.execute(
            q(
                "UPDATE jobs SET status = CASE WHEN id % 20 = 0 THEN 'failed' ELSE 'done' END,"
                " due_at = NULL, ready = false, attempt = 1, ever_run = true"
                " WHERE task = :task AND id % 10 < 6"
            ),
            {"task": FETCH_TASK},
        )
        rows = store.db.execute(
            q(
                "SELECT p.url, j.status FROM crawl_pages p JOIN jobs j"
                " ON j.item_id = p.item_id AND j.task = :task"
                " WHERE p.crawl_id = :crawl AND j.ever_run"
            ),
            {"task": FETCH_TASK, "crawl": crawl_id},
        )
        attempts = [
            _attempt(crawl_id, url, status, now - (n % 3000) * 0.5, n)
            for n, (url, status) in enumerate(rows)
        ]
    for start in range(0, len(attempts), BATCH):
        with store.write():
            for row in attempts[start : start + BATCH]:
                store.crawls.add_attempt(row)
    print(f"  attempts: {len(attempts):,}")


def _attempt(crawl_id: int, url: str, status: str, at: float, n: int) -> dict[str, Any]:
    failed = status == "failed"
    return {
        "crawl_id": crawl_id,
        "url": url,
        "attempt": 1,
        "ruleset": 1,
        "host": url.split("/")[2],
        "started_at": at,
        "elapsed": 0.2,
        "outcome": status,
        "status_code": 503 if failed else 200,
        "location": None,
        "content_type": "text/html",
        "size": 20_000,
        "outlinks": 12,
        "outlinks_cut": None,
        "error": None,
        "digest": None,
        "warc_file": "bench.warc.gz",
        "warc_offset": n * 9000,
        "warc_length": 9000,
    }


def seed_failures(store: Store, count: int) -> None:
    with store.write():
        jobs = store.db.execute(
            q("SELECT id, item_id FROM jobs WHERE task = 'price' ORDER BY id LIMIT :n"),
            {"n": count},
        )
        kinds = ["ValueError", "TimeoutError", "KeyError", "HTTPError"]
        rows = [
            {
                "job_id": job_id,
                "item_id": item_id,
                "task": "price",
                "attempt": 1,
                "error_type": kinds[n % len(kinds)],
                "message": f"failure {n}",
                "traceback": "Traceback (most recent call last):\n  ...\nValueError: x",
                "occurred_at": store.clock() - n,
                "allowed": False,
            }
            for n, (job_id, item_id) in enumerate(jobs)
        ]
        store.record_failures(rows)
    print(f"  failures: {count:,}")


def serve(url: str) -> tuple[uvicorn.Server, str]:
    app = create_app(url, token_cache=60.0)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"


def time_pages(base: str, token: str, paths: list[str]) -> list[tuple[str, float, float, float]]:
    client = httpx.Client(base_url=base, timeout=60, follow_redirects=True)
    csrf = re.search(r'name="_csrf" value="([^"]+)"', client.get("/ui/signin").text)
    assert csrf
    # on to a cheap page: the overview's first request below is its cold one
    client.post("/ui/signin", data={"_csrf": csrf.group(1), "token": token, "next": "/ui/limits"})
    # the feed's first reading of the gauges, taken as the server starts (pages never wait
    # for it, but it competes with them for the CPU and the database while it runs)
    started = time.perf_counter()
    while "Reading the database's counts" in client.get("/").text:
        time.sleep(0.05)
    print(f"  the feed's first reading, from sign-in: {time.perf_counter() - started:.2f} s")
    out = []
    for path in paths:
        times = []
        for _ in range(6):
            started = time.perf_counter()
            answer = client.get(path)
            times.append(time.perf_counter() - started)
            assert answer.status_code == 200, (path, answer.status_code, answer.text[-300:])
        out.append((path, times[0], statistics.median(times[1:]), max(times[1:])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--db", help="a database URL (default: a new SQLite file); one seeded before is reused"
    )
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--failures", type=int, default=10_000)
    args = parser.parse_args()
    url = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='trawl-dash-')}/bench.db"
    print(f"database: {url}")
    started = time.perf_counter()
    with Store(url) as store:
        migrate.upgrade(store.db)
        if not store.crawls.newest(before=None, limit=1):  # a database seeded before is reused
            seed_items(store, args.items)
            crawl_id = seed_crawl(store, args.pages)
            finish_pages(store, crawl_id)
            seed_failures(store, args.failures)
            store.db.execute(q("ANALYZE"))
            print(f"seeded in {time.perf_counter() - started:.0f} s")
        crawl = store.crawls.newest(before=None, limit=1)[0]
        crawl_id, url_of_page = crawl.id, crawl.seeds[0]
        store.tokens.revoke("bench", store.clock())
        token = store.tokens.create("bench", "read", store.clock())

    with Store(url) as store:
        gauges = DbMetrics(cache_seconds=0)
        for name, fn in [
            ("feed: overview (gauges + workers)", lambda: figures.overview(store, gauges)),
            ("feed: crawl list (gauges)", lambda: figures.crawl_list(store, gauges)),
            ("feed: one crawl's figures", lambda: figures.crawl(store, crawl_id)),
        ]:
            times = []
            for _ in range(3):
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
            print(f"  {name:<40} {statistics.median(times) * 1000:8.0f} ms")

    sample = f"sku:{args.items * 7 // 9}"
    logging.getLogger("httpx").setLevel(logging.WARNING)
    server, base = serve(url)
    paths = [
        "/",
        "/ui/crawls",
        f"/ui/crawls/{crawl_id}",
        f"/ui/crawls/{crawl_id}?status=failed",
        f"/ui/crawls/{crawl_id}?status=running",
        f"/ui/crawls/{crawl_id}?q=/d4/p5",
        f"/ui/crawls/{crawl_id}?q=no-such-url",
        f"/ui/crawls/{crawl_id}/page?url={quote(url_of_page)}",
        f"/ui/items?q={sample}",
        "/ui/items?q=product&by=tag&after=sku:5",
        f"/ui/item?id={sample}",
        "/ui/failures",
        "/ui/failures/group?task=price&error_type=ValueError",
        "/ui/failures/1",
        "/ui/journal",
        "/ui/journal?kind=crawl.created",
        "/ui/limits",
    ]
    print(f"{'page':<56} {'first':>8} {'median':>8} {'worst':>8}")
    for path, first, median, worst in time_pages(base, token, paths):
        print(f"{path:<56} {first * 1000:6.0f}ms {median * 1000:6.0f}ms {worst * 1000:6.0f}ms")
    server.should_exit = True


if __name__ == "__main__":
    main()
