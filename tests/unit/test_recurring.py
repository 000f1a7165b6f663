"""Cron arithmetic of recurring schedules, across DST changes, and every bad input named."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from trawl.model.errors import InvalidInput
from trawl.runtime import recurring


def at(text: str, tz: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp()


def local(epoch: float, tz: str) -> str:
    return datetime.fromtimestamp(epoch, ZoneInfo(tz)).isoformat()


@pytest.mark.parametrize(
    ("cron", "tz", "after", "expected"),
    [
        # Spring forward in Paris (02:00 -> 03:00): 02:30 does not exist that day.
        (
            "30 2 * * *",
            "Europe/Paris",
            "2026-03-28T12:00",
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"],
        ),
        # Fall back in Paris (03:00 -> 02:00): 02:30 happens twice but runs once.
        (
            "30 2 * * *",
            "Europe/Paris",
            "2026-10-24T12:00",
            ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        ),
        # Hourly across fall back: both 01:00s in New York are distinct instants.
        (
            "0 * * * *",
            "America/New_York",
            "2026-11-01T00:30",
            ["2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00"],
        ),
        # Hourly across spring forward in New York: no 02:00 that day, and no double run.
        (
            "0 * * * *",
            "America/New_York",
            "2026-03-08T00:30",
            ["2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00"],
        ),
        # Daily at 01:30 across fall back in New York: the first 01:30 only.
        (
            "30 1 * * *",
            "America/New_York",
            "2026-10-31T12:00",
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        ),
        # Weekly on the Sunday clocks go forward in Paris: at the jump, then as usual.
        (
            "15 2 * * 0",
            "Europe/Paris",
            "2026-03-22T12:00",
            ["2026-03-29T03:00:00+02:00", "2026-04-05T02:15:00+02:00"],
        ),
        # A daily run at 03:00 UTC is 04:00 or 03:00 in London depending on the season.
        (
            "0 3 * * *",
            "UTC",
            "2026-06-30T23:00",
            ["2026-07-01T03:00:00+00:00", "2026-07-02T03:00:00+00:00"],
        ),
        # Day-of-month 31 skips months without one.
        (
            "0 0 31 * *",
            "UTC",
            "2026-04-01T00:00",
            ["2026-05-31T00:00:00+00:00", "2026-07-31T00:00:00+00:00"],
        ),
    ],
)
def test_fires_across_dst(cron: str, tz: str, after: str, expected: list[str]) -> None:
    start = at(after, tz)
    found = recurring.fires(cron, tz, start, start + 400 * 86400, limit=2)
    assert [local(f, tz) for f in found] == expected


def test_fires_are_strictly_after_and_within_until() -> None:
    start = at("2026-01-01T00:00", "UTC")
    found = recurring.fires("*/15 * * * *", "UTC", start, start + 3600)
    assert [f - start for f in found] == [900, 1800, 2700, 3600]


def test_next_fire_is_the_first_after() -> None:
    start = at("2026-01-01T00:00", "UTC")
    assert recurring.next_fire("0 3 * * *", "UTC", start) == start + 3 * 3600


def test_missed_fires_are_counted_for_coalescing() -> None:
    start = at("2026-01-01T00:00", "UTC")
    assert len(recurring.fires("* * * * *", "UTC", start, start + 3600)) == 60


@pytest.mark.parametrize(
    ("name", "cron", "tz", "action", "message"),
    [
        ("n", "61 * * * *", "UTC", ("add", "x"), "bad cron expression '61 * * * *'"),
        ("n", "* * *", "UTC", ("add", "x"), "bad cron expression"),
        ("n", "* * * * *", "Mars/Base", ("add", "x"), "unknown time zone 'Mars/Base'"),
        ("n", "* * * * *", "UTC", (), "needs an action"),
        ("n", "* * * * *", "UTC", ("worker", "app.py:app"), "'worker' is not one of"),
        ("two words", "* * * * *", "UTC", ("add", "x"), "without spaces"),
        ("", "* * * * *", "UTC", ("add", "x"), "must be non-empty"),
    ],
)
def test_bad_schedules_are_named(
    name: str, cron: str, tz: str, action: tuple[str, ...], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message.replace("*", r"\*")):
        recurring.make(name, cron, tz, action, 0.0)


def test_round_trip_through_item_data() -> None:
    spec = recurring.make("nightly", "0 3 * * *", "Europe/Paris", ("crawl", "https://a/"), 5.0)
    again = recurring.Recurring.from_data(spec.item_id, spec.to_data())
    assert again == spec
    assert spec.item_id == "schedule:nightly"
    assert spec.command() == "trawl crawl https://a/"
