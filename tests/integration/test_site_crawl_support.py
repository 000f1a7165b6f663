"""The test crawl helper's own error path: a crawl still running at its limit fails with
where it stood, not with pytest's thread dump of idle threads."""

from __future__ import annotations

import re

import pytest

from tests.support import site_crawl
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate


def test_a_crawl_past_its_limit_fails_with_its_open_pages_and_task_stacks(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(site_crawl, "HANG", 0.5)
    with SiteServer(generate(2000)) as server:  # far more than 0.5 s of work
        crawl_id = site_crawl.create(sqlite_url, server, depth=3)
        with pytest.raises(AssertionError) as raised:
            site_crawl.run(sqlite_url, crawl_id, concurrency=1)
        origin = server.origin["main"]
    report = str(raised.value)
    assert report.startswith("the crawl ran 0.5 s and had not finished")
    # The pages still to do, with their state: on a loaded machine only the seed may have
    # been claimed by then ("running attempt 1"; CI saw it once), else the pages it found.
    assert re.search(r" (queued|running) attempt \d+ ", report), report
    assert f"  {origin}/" in report
    assert "Stack for <Task" in report  # what the loop's tasks were awaiting
