"""The slack between a host's starts, and how late after its start a request may still go."""

from __future__ import annotations

import math

from trawl.crawl.pacing import latest_send
from trawl.crawl.politeness import MIN_SLACK, SLACK, slack


def test_no_delay_no_slack_and_no_latest_send() -> None:
    assert slack(0.0) == 0.0
    assert latest_send(0.0) == math.inf


def test_a_tenth_of_the_delay_between_the_floor_and_the_cap() -> None:
    assert slack(0.1) == 0.01
    assert slack(1.0) == SLACK
    assert slack(30.0) == SLACK


def test_a_small_delay_still_leaves_a_send_window_the_event_loop_can_meet() -> None:
    """A task sleeping until its start wakes up to a millisecond or two late: with a tenth
    of 20 ms (1 ms to send in), a crawl at --delay 0.02 missed nearly every start."""
    for delay in (0.001, 0.01, 0.02, 0.05):
        assert slack(delay) >= MIN_SLACK
        assert latest_send(delay) >= 0.0025


def test_the_slack_never_shrinks_as_the_delay_grows() -> None:
    delays = [d / 1000 for d in range(1, 2000)]
    values = [slack(d) for d in delays]
    assert values == sorted(values)
