"""A politeness plan crosses the wire to a remote pipeline and comes back the same."""

from __future__ import annotations

import msgspec

from trawl.crawl.options import Options
from trawl.crawl.politeness import Plan
from trawl.crawl.remote import plan_from_wire, plan_to_wire
from trawl.crawl.rules import Ruleset, Settings, make_rule
from trawl.model import wire
from trawl.store.crawls import CrawlRow


def test_a_fetch_plan_round_trips_through_its_encoded_frame() -> None:
    options = Options(warc="crawl.warc.gz", timeout=7.5, max_links=50)
    crawl = CrawlRow(
        id=3,
        spec="books",
        seeds=["http://127.0.0.1:8000/"],
        depth_limit=4,
        niceness=1,
        concurrency=16,
        tag=None,
        created_by="test",
        note=None,
        aborted=False,
        ruleset=2,
        options=options.to_json(),
        created_at=1_700_000_000.5,
    )
    rules = Ruleset(2, [make_rule("header", "/a/", "X-Test: 1"), make_rule("skip", r"\.zip$")])
    settings = Settings(accept=True, headers={"X-Test": "1"}, cookies={"s": "v"})
    plan = Plan(
        action="fetch",
        crawl=crawl,
        options=options,
        ruleset=rules,
        settings=settings,
        start_at=1_700_000_001.25,
        host_errors=2,
        delay=0.5,
    )
    frame = msgspec.json.encode(plan_to_wire(plan))  # as the tracker sends it
    back = plan_from_wire(msgspec.json.decode(frame, type=wire.CrawlPlan))
    assert back.crawl == crawl
    assert back.options == options
    assert back.settings == settings
    assert back.ruleset is not None
    assert back.ruleset.version == 2
    assert back.ruleset.rules == rules.rules
    assert (back.action, back.start_at, back.host_errors, back.delay) == (
        "fetch",
        1_700_000_001.25,
        2,
        0.5,
    )


def test_a_plan_without_a_crawl_sends_none() -> None:
    plan = Plan(action="defer", until=1_700_000_009.0, reason="robots")
    back = plan_from_wire(plan_to_wire(plan))
    assert (back.crawl, back.settings, back.ruleset) == (None, None, None)
    assert (back.action, back.until, back.reason) == ("defer", 1_700_000_009.0, "robots")
