"""Rules are versioned: an edit takes effect on the next claim, each attempt records the
version it ran under, and an edit based on an old version is rejected."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support import site_crawl
from trawl.crawl import operations
from trawl.crawl.operations import RulesetConflict
from trawl.crawl.options import Options
from trawl.crawl.rules import make_rule
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate
from trawl.store.store import Store

CONCURRENCY = 2


def test_a_rule_added_mid_crawl_applies_from_the_next_claim(sqlite_url: str) -> None:
    """Judged by what each attempt recorded (its ruleset version and start), with no time
    margins: an attempt reads the ruleset when it begins, after its claim, and starts its
    request no earlier; so once the edit committed, only the attempts already begun (at
    most one per slot) can still start under the old version."""
    with SiteServer(generate(80)) as server:
        options = Options(delay=0.03, timeout=5.0)
        crawl_id = site_crawl.create(sqlite_url, server, depth=3, options=options)
        edits: list[tuple[int, float, float]] = []
        editor = threading.Thread(target=_edit_after, args=(sqlite_url, crawl_id, 15, edits))
        editor.start()
        site_crawl.run(sqlite_url, crawl_id, concurrency=CONCURRENCY)  # main thread: signals
        editor.join(10)
        attempts = site_crawl.attempts(sqlite_url, crawl_id)
    [(version, asked, committed)] = edits
    assert version == 2
    old = [a for a in attempts if a["ruleset"] == 1]
    new = [a for a in attempts if a["ruleset"] == 2]
    assert old, "the crawl ran under the first ruleset before the edit"
    assert new, "nothing was claimed after the edit"
    assert all(a["started_at"] >= asked for a in new), "no attempt saw the edit early"
    late = [a for a in old if a["started_at"] > committed]
    assert len(late) <= CONCURRENCY, f"attempts began under the old rules after the edit: {late}"
    pages = [a for a in new if "/page/" in a["url"]]
    assert pages
    assert all((a["outcome"], a["error"]) == ("skipped", "rule:2") for a in pages)


def test_an_edit_based_on_an_old_ruleset_is_rejected(sqlite_url: str) -> None:
    with SiteServer(generate(50)) as server:
        crawl_id = site_crawl.create(sqlite_url, server, depth=1)
    with Store(sqlite_url) as store:
        assert operations.edit_rules(store, crawl_id, add=[make_rule("skip", "x")], ensure=1) == 2
        with pytest.raises(RulesetConflict, match="at version 2, not 1"):
            operations.edit_rules(store, crawl_id, add=[make_rule("skip", "y")], ensure=1)
        version, rules = operations.rules(store, crawl_id)
    assert version == 2
    assert [r["match"] for r in rules if r["kind"] == "skip"] == ["x"]


def _edit_after(url: str, crawl_id: int, count: int, edits: list[tuple[int, float, float]]) -> None:
    """Once *count* pages are done, add a rule skipping /page/ URLs (from another thread);
    records (version, when the edit was asked for, when it had committed)."""
    deadline = time.monotonic() + 60
    with Store(url) as store:
        while operations.progress(store, crawl_id).done < count and time.monotonic() < deadline:
            time.sleep(0.02)
        rule = make_rule("skip", r"/page/")
        asked = time.time()
        version = operations.edit_rules(store, crawl_id, add=[rule], ensure=1)
        edits.append((version, asked, time.time()))
