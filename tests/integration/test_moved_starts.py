"""A request that missed its start (its connection to a distant host took longer than the
permit's margin) asks the gate again with the start it missed: when no later start on the
host was reserved meanwhile, that start moves to now and the host's next one moves with
it, so the request goes out as soon as it is ready and the host's spacing still holds.
Otherwise it takes the host's next start, as before."""

from __future__ import annotations

import pytest

from tests.integration.helpers import FakeClock
from trawl.crawl.politeness import block_host, pace_host, slack
from trawl.store.store import Store

DELAY = 0.5
STEP = DELAY + slack(DELAY)


def test_a_missed_start_that_is_the_hosts_last_moves_to_now(store: Store, clock: FakeClock) -> None:
    missed = pace_host(store, "a.test", DELAY)
    assert missed == clock.now
    clock.advance(0.08)  # a connection set up meanwhile
    moved = pace_host(store, "a.test", DELAY, after=missed)
    assert moved == clock.now  # not missed + STEP: the request is ready now
    after_it = pace_host(store, "a.test", DELAY)
    assert after_it == pytest.approx(moved + STEP)  # the host's next start moved with it


def test_a_moved_start_waits_for_the_lead_its_answer_needs(store: Store, clock: FakeClock) -> None:
    missed = pace_host(store, "a.test", DELAY)
    assert missed is not None
    clock.advance(0.08)
    moved = pace_host(store, "a.test", DELAY, after=missed, lead=0.03)
    assert moved == pytest.approx(clock.now + 0.03)


def test_a_missed_start_with_a_later_one_reserved_takes_the_hosts_next(
    store: Store, clock: FakeClock
) -> None:
    missed = pace_host(store, "a.test", DELAY)
    later = pace_host(store, "a.test", DELAY)  # another request's, one step on
    assert missed is not None
    assert later is not None
    clock.advance(0.08)
    again = pace_host(store, "a.test", DELAY, after=missed)
    assert again == pytest.approx(later + STEP)  # moving it would crowd `later`


@pytest.mark.parametrize("ahead", [STEP + 0.01, 1e12], ids=["a-step-ahead", "far-ahead"])
def test_a_start_claimed_missed_but_still_ahead_does_not_move(
    store: Store, clock: FakeClock, ahead: float
) -> None:
    """Only a start that has passed (or is less than a step ahead, a pipeline's clock
    being off) moves: anything else is a confused asker, and taking its word would move
    the host's next start as far as it says."""
    first = pace_host(store, "a.test", DELAY)
    assert first is not None
    again = pace_host(store, "a.test", DELAY, after=clock.now + ahead)
    assert again == pytest.approx(first + STEP)


def test_a_missed_start_on_a_blocked_host_gets_none(store: Store, clock: FakeClock) -> None:
    missed = pace_host(store, "a.test", DELAY)
    block_host(store, "a.test", clock.now + 30)
    assert pace_host(store, "a.test", DELAY, after=missed) is None
