"""The store verbs the dashboard reads through, on both backends: workers from their
leases, the journal's flow and its bounded look back, a crawl's hosts and depths, failure
groups, URL search taken literally, per-crawl gauges, and session signing keys."""

from __future__ import annotations

import hashlib
import hmac

from tests.integration.helpers import FakeClock, claim, commit_one, failure, item, task
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store
from trawl.store.tokens import token_id


def _crawl(store: Store, *urls: str) -> int:
    operations.register(store, make_app().get(FETCH_TASK).info())
    return operations.create(store, operations.CrawlSpec(seeds=tuple(urls)))


def test_workers_are_the_owners_of_running_jobs(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task("price"), task("stock")])
    store.add_items([item(f"sku:{n}", "product") for n in range(5)])
    claim(store, "price", limit=3, owner="a")
    claim(store, "stock", limit=1, owner="a", lease=30)
    claim(store, "price", limit=1, owner="b")
    with store.read():
        found = store.activity.workers(["price", "stock"])
        assert store.activity.workers([]) == []
    assert [(w.owner, w.running, w.tasks) for w in found] == [
        ("a", 4, ("price", "stock")),
        ("b", 1, ("price",)),
    ]
    assert found[0].lease_until == clock.now + 30  # the earliest of its leases


def test_the_journals_flow_counts_by_task_and_kind(store: Store) -> None:
    store.register_tasks([task("price")])
    with store.read():
        start = store.activity.last_seq()
    store.add_items([item("sku:1", "product"), item("sku:2", "product")])
    for job in claim(store, "price", limit=2):
        commit_one(store, failure(job))
    with store.read():
        upto = store.activity.last_seq()
        flow = store.activity.flow(start, upto)
        assert store.activity.flow(upto, upto).counts == {}
    assert flow.last == upto
    assert flow.counts[("price", "job.failed")] == 2


def test_recent_entries_look_back_only_so_far(store: Store) -> None:
    store.add_items([item(f"sku:{n}") for n in range(6)])
    store.register_tasks([task("price")])  # a task.registered entry, newest
    with store.read():
        last = store.activity.last_seq()
        newest = store.activity.recent(before=last + 1, window=100, limit=3)
        assert [e.seq for e in newest] == [last, last - 1, last - 2]
        kind = newest[0].kind
        assert [
            e.kind for e in store.activity.recent(before=last + 1, window=100, limit=9, kind=kind)
        ] == [kind]
        # the same filter, looking back one entry less than where the match is: nothing
        assert store.activity.recent(before=last, window=100, limit=9, kind=kind) == []
        older = store.activity.recent(before=last + 1, window=2, limit=9)
        assert [e.seq for e in older] == [last, last - 1]


def test_a_crawls_depths_hosts_and_page_attempts(store: Store, clock: FakeClock) -> None:
    crawl_id = _crawl(store, "http://a.example/", "http://b.example/x")
    with store.write():
        for n, (url, host, code) in enumerate(
            [("http://a.example/", "a.example", 200), ("http://b.example/x", "b.example", 503)]
        ):
            store.crawls.add_attempt(
                {
                    "crawl_id": crawl_id, "url": url, "attempt": 1, "ruleset": 1, "host": host,
                    "started_at": clock.now - n, "elapsed": 0.1, "outcome": "done",
                    "status_code": code, "location": None, "content_type": "text/html",
                    "size": 10, "outlinks": 0, "outlinks_cut": None, "error": None,
                    "digest": None, "warc_file": "x.warc.gz", "warc_offset": 100 * n,
                    "warc_length": 99,
                }
            )  # fmt: skip
    with store.read():
        assert store.listings.depths(crawl_id) == [(0, 2)]
        hosts = store.activity.crawl_hosts(crawl_id, clock.now - 60, clock.now, 10)
        assert store.activity.crawl_hosts(crawl_id, clock.now + 1, clock.now, 10) == []
        assert store.activity.crawl_requests(crawl_id, clock.now - 60) == 2
        attempts = store.listings.page_attempts(crawl_id, "http://b.example/x")
    assert [(h.host, h.requests, h.errors) for h in hosts] == [
        ("a.example", 1, 0),
        ("b.example", 1, 1),  # a 503 counts as an error
    ]
    assert [(a.status_code, a.ruleset, a.warc_file, a.warc_offset) for a in attempts] == [
        (503, 1, "x.warc.gz", 100)
    ]


def test_url_search_is_literal(store: Store) -> None:
    crawl_id = _crawl(
        store, "http://a.example/100%", "http://a.example/a_b", "http://a.example/axb"
    )

    def found(text: str) -> list[str]:
        with store.read():
            rows = store.listings.crawl_pages(
                crawl_id, status=None, after="", limit=10, containing=text
            )
        return [r.url for r in rows]

    assert found("a_b") == ["http://a.example/a_b"]  # _ is not "any character"
    assert found("100%") == ["http://a.example/100%"]
    assert found("nothing") == []
    assert len(found("")) == 3


def test_failure_groups_by_task_and_error_type(store: Store) -> None:
    store.register_tasks([task("price")])
    store.add_items([item(f"sku:{n}", "product") for n in range(3)])
    for job in claim(store, "price", limit=3):
        commit_one(store, failure(job))
    with store.read():
        groups = store.listings.failure_groups(10)
        only = store.listings.failures(
            task="price", item_id=None, include_handled=False, before=None, limit=10,
            error_type="KeyError",
        )  # fmt: skip
    assert [(g.task, g.error_type, g.count) for g in groups] == [("price", "RuntimeError", 3)]
    assert only == []


def test_gauges_count_each_crawls_pages_as_its_progress_does(store: Store) -> None:
    first = _crawl(store, "http://a.example/", "http://a.example/2")
    second = _crawl(store, "http://b.example/")
    operations.abort(store, second)
    snap = store.gauges()
    for crawl_id in (first, second):
        crawl = store.crawls.get(crawl_id)
        assert crawl is not None
        summary = operations.summary(crawl, snap.crawls[crawl_id])
        full = operations.progress(store, crawl_id)
        assert (summary.status, summary.ready, summary.parked) == (
            full.status,
            full.ready,
            full.parked,
        )
    assert snap.pages == {"queued": 3}
    with store.read():
        newest = store.crawls.newest(before=None, limit=1)
        assert [c.id for c in newest] == [second]
        assert [c.id for c in store.crawls.newest(before=second, limit=5)] == [first]


def test_a_tokens_mac_is_keyed_by_its_hash_and_ends_with_it(store: Store) -> None:
    text = store.tokens.create("ops", "write", store.clock())
    tid = token_id(text)
    assert tid is not None
    assert token_id("not-a-token") is None
    signed = store.tokens.mac(tid, b"hello")
    assert signed is not None
    row, mac = signed
    assert (row.name, row.scope) == ("ops", "write")
    assert store.tokens.mac(tid, b"hello") == signed  # the same key each time
    assert signed[1] != store.tokens.mac(tid, b"hellO")[1]  # type: ignore[index]
    assert not hmac.compare_digest(mac, hmac.new(b"", b"hello", hashlib.sha256).digest())
    assert store.tokens.mac("nobody", b"hello") is None
    store.tokens.revoke("ops", store.clock())
    assert store.tokens.mac(tid, b"hello") is None
