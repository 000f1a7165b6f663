"""A pipeline's crawl.host_failed names the page; against a tracker from before, which
refuses the page's fields as unknown, it asks again with the host alone, from then on."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from trawl.crawl.remote import RemotePort
from trawl.model import wire
from trawl.runtime.context import Context
from trawl.runtime.remote.connection import Connection, RequestRefused

URL = "http://a.test:8080/x"


class _Tracker:
    """Answers crawl.host_failed as a tracker that knows the page's fields or not."""

    def __init__(self, *, knows_pages: bool, refusal: str = "") -> None:
        self.knows_pages, self.refusal = knows_pages, refusal
        self.asked: list[wire.HostFailedRequest] = []

    async def request(self, kind: str, request: Any, reply: type[Any]) -> Any:
        assert kind == "crawl.host_failed"
        self.asked.append(request)
        if self.refusal:
            raise RequestRefused("InvalidInput", self.refusal, None)
        if request.url is not None and not self.knows_pages:
            raise RequestRefused(
                "InvalidInput", "Object contains unknown field `crawl` - at `$`", None
            )
        return wire.HostFailedReply(until=5.0)


def _ask(tracker: _Tracker, times: int = 1) -> list[float | None]:
    port = RemotePort(cast(Connection, tracker))
    ctx = cast(Context, None)  # host_failed does not read the attempt's context
    return [asyncio.run(port.host_failed(ctx, 7, URL, 60.0)) for _ in range(times)]


def test_the_page_goes_with_the_host() -> None:
    tracker = _Tracker(knows_pages=True)
    assert _ask(tracker) == [5.0]
    (asked,) = tracker.asked
    assert (asked.host, asked.crawl, asked.url, asked.grace) == ("a.test:8080", 7, URL, 60.0)


def test_a_tracker_from_before_gets_the_host_alone_from_then_on() -> None:
    tracker = _Tracker(knows_pages=False)
    assert _ask(tracker, times=2) == [5.0, 5.0]
    assert [a.url for a in tracker.asked] == [URL, None, None]


def test_any_other_refusal_is_the_callers() -> None:
    tracker = _Tracker(knows_pages=True, refusal="grace: Expected `float` - at `$.grace`")
    with pytest.raises(RequestRefused, match="grace"):
        _ask(tracker)
    assert len(tracker.asked) == 1
