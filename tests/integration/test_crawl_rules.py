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


# Timing-sensitive (bounds on both sides); seen failing only with other test runs
# competing for the 2 cores, so it gets up to two more tries.
@pytest.mark.flaky(reruns=2)
def test_a_rule_added_mid_crawl_applies_from_the_next_claim(sqlite_url: str) -> None:
    with SiteServer(generate(80)) as server:
        options = Options(delay=0.03, timeout=5.0)
        crawl_id = site_crawl.create(sqlite_url, server, depth=3, options=options)
        edits: list[tuple[int, float]] = []
        editor = threading.Thread(target=_edit_after, args=(sqlite_url, crawl_id, 15, edits))
        editor.start()
        site_crawl.run(sqlite_url, crawl_id, concurrency=2)  # signal handlers: main thread
        editor.join(10)
        attempts = site_crawl.attempts(sqlite_url, crawl_id)
    [(version, edited)] = edits
    assert version == 2
    # started_at is when a fetch began: a job claimed just before the edit may still wait
    # out its host's delay (two slots of 0.03 s at concurrency 2) and a fetch ahead of it.
    settled = edited + 0.05 + 2 * options.delay + 0.15
    later = [a for a in attempts if a["started_at"] > settled]
    assert later, "nothing was claimed after the edit"
    assert all(a["ruleset"] == 2 for a in later)
    # By the version each attempt recorded, not by time: skips under the new rule come so
    # fast that on a quick machine all of them start within the margin above.
    pages = [a for a in attempts if a["ruleset"] == 2 and "/page/" in a["url"]]
    assert pages
    assert all((a["outcome"], a["error"]) == ("skipped", "rule:2") for a in pages)
    before = [a for a in attempts if a["started_at"] < edited - 0.05]
    assert before
    assert all(a["ruleset"] == 1 for a in before)


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


def _edit_after(url: str, crawl_id: int, count: int, edits: list[tuple[int, float]]) -> None:
    """Once *count* pages are done, add a rule skipping /page/ URLs (from another thread)."""
    deadline = time.monotonic() + 60
    with Store(url) as store:
        while operations.progress(store, crawl_id).done < count and time.monotonic() < deadline:
            time.sleep(0.02)
        rule = make_rule("skip", r"/page/")
        edits.append((operations.edit_rules(store, crawl_id, add=[rule], ensure=1), time.time()))
