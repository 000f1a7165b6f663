"""A crawl's row as the store returns it, for tests of the parts that read one."""

from __future__ import annotations

from typing import Any

from trawl.store.crawls import CrawlRow


def crawl_row(crawl_id: int = 1, options: dict[str, Any] | None = None, **fields: Any) -> CrawlRow:
    """A live crawl of ``http://a.test/`` with concurrency 1; *fields* override."""
    values: dict[str, Any] = {
        "id": crawl_id,
        "spec": None,
        "seeds": ["http://a.test/"],
        "depth_limit": None,
        "niceness": 0,
        "concurrency": 1,
        "tag": None,
        "created_by": None,
        "note": None,
        "aborted": False,
        "ruleset": 1,
        "options": options or {},
        "created_at": 0.0,
    }
    return CrawlRow(**(values | fields))
