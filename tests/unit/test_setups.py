"""The per-host connection setup times a request to a slow host is begun early by."""

from __future__ import annotations

import asyncio
import time

import pytest

from trawl.crawl.client import HostHeldOff
from trawl.crawl.setups import LEAD_FACTOR, LEAD_MAX, Setups
from trawl.crawl.state import ProcessState
from trawl.crawl.task import _on_start


def test_a_host_not_seen_or_found_connected_is_begun_on_its_start() -> None:
    setups = Setups()
    assert setups.lead("a.test") == 0.0
    setups.note("a.test", 0.0)
    assert setups.lead("a.test") == 0.0


def test_a_host_slow_to_connect_is_begun_early_by_its_last_setup_and_half_again() -> None:
    setups = Setups()
    setups.note("a.test", 0.1)
    assert setups.lead("a.test") == LEAD_FACTOR * 0.1
    setups.note("a.test", 0.0)  # the next found a kept-alive connection
    assert setups.lead("a.test") == 0.0


def test_a_lead_is_never_more_than_lead_max() -> None:
    setups = Setups()
    setups.note("far.test", 30.0)
    assert setups.lead("far.test") == LEAD_MAX


def test_the_host_used_longest_ago_is_forgotten_past_the_limit() -> None:
    setups = Setups(hosts=2)
    setups.note("a.test", 0.1)
    setups.note("b.test", 0.1)
    setups.note("a.test", 0.1)  # used again: b is now the oldest
    setups.note("c.test", 0.1)
    assert [setups.lead(h) > 0 for h in ("a.test", "b.test", "c.test")] == [True, False, True]


def test_a_request_begun_early_waits_for_its_start_unless_its_host_is_held_off() -> None:
    """What the fetch task gives the client as *ready* (task._on_start): the wait for the
    start, then the host's hold checked again, as a 429 may have come meanwhile."""
    rt = ProcessState()
    start = time.time() + 0.05
    asyncio.run(_on_start(rt, "a.test", start))
    assert time.time() >= start
    rt.blocked["a.test"] = time.time() + 10
    with pytest.raises(HostHeldOff, match=r"a\.test asked to be left alone"):
        asyncio.run(_on_start(rt, "a.test", time.time() + 0.01))
