"""A pipeline's crawl.begin carries its connection lead; against a tracker from before, which
refuses ``lead`` as an unknown field, it asks again without one, from then on."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgspec
import pytest

from trawl.crawl.remote import RemotePort
from trawl.model import wire
from trawl.runtime.context import Context
from trawl.runtime.remote.connection import Connection, RequestRefused

URL = "http://a.test/x"


class _Tracker:
    """Answers crawl.begin as a tracker that knows the lead or not."""

    def __init__(self, *, knows_lead: bool, refusal: str = "") -> None:
        self.knows_lead, self.refusal = knows_lead, refusal
        self.asked: list[wire.CrawlBeginRequest] = []

    async def request(self, kind: str, request: Any, reply: type[Any]) -> Any:
        assert kind == "crawl.begin"
        self.asked.append(request)
        if self.refusal:
            raise RequestRefused("InvalidInput", self.refusal, None)
        if request.lead and not self.knows_lead:
            raise RequestRefused("InvalidInput", "Object contains unknown field `lead`", None)
        return wire.CrawlPlan(action="defer", until=5.0)


def _begin(tracker: _Tracker, leads: list[float]) -> list[float | None]:
    port = RemotePort(cast(Connection, tracker))

    async def begin(lead: float) -> float | None:
        ctx = cast(Context, type("Ctx", (), {"id": "page", "attempt": 1})())
        return (await port.begin(ctx, 7, URL, [], lead)).until

    return [asyncio.run(begin(lead)) for lead in leads]


def test_the_lead_goes_with_the_page() -> None:
    tracker = _Tracker(knows_lead=True)
    assert _begin(tracker, [0.3, 0.0]) == [5.0, 5.0]
    assert [a.lead for a in tracker.asked] == [0.3, 0.0]
    # What crosses the socket: a lead of 0 is left out, so an older tracker takes it.
    assert b'"lead"' not in msgspec.json.encode(tracker.asked[1])


def test_a_tracker_from_before_gets_no_lead_from_then_on() -> None:
    tracker = _Tracker(knows_lead=False)
    assert _begin(tracker, [0.3, 0.4]) == [5.0, 5.0]
    assert [a.lead for a in tracker.asked] == [0.3, 0.0, 0.0]


def test_any_other_refusal_is_the_callers() -> None:
    tracker = _Tracker(knows_lead=True, refusal="not leased to this pipeline")
    with pytest.raises(RequestRefused, match="not leased"):
        _begin(tracker, [0.3])
    assert len(tracker.asked) == 1
