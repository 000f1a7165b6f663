"""A worker remembers the first copies of the payloads it archived lately, and forgets the
oldest past its size: memory that does not grow with the crawl."""

from __future__ import annotations

from trawl.crawl.state import RecentPayloads


def test_the_oldest_first_copy_is_forgotten_past_the_size() -> None:
    recent = RecentPayloads(2)
    recent.add((1, "sha1:A"), ("http://a/", "d1"))
    recent.add((1, "sha1:B"), ("http://b/", "d2"))
    assert recent.get((1, "sha1:A")) == ("http://a/", "d1")
    recent.add((1, "sha1:C"), ("http://c/", "d3"))
    assert len(recent) == 2
    assert recent.get((1, "sha1:A")) is None
    assert recent.get((1, "sha1:C")) == ("http://c/", "d3")
    assert recent.get((2, "sha1:C")) is None  # another crawl's payloads are its own
