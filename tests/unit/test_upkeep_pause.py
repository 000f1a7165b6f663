"""When a worker looks after its database (planner statistics, vacuum): often in its first
seconds, when a new crawl's statements are prepared and its tables grow fastest, then less
and less often, up to UPKEEP_EVERY."""

from __future__ import annotations

import itertools

import pytest

from trawl.runtime import worker
from trawl.runtime.worker import UPKEEP_EARLY, UPKEEP_EVERY, UPKEEP_FIRST, upkeep_pause


def _looks(until: float) -> list[float]:
    """When the looks come, in seconds from the start, up to *until*."""
    elapsed, pause, looks = 0.0, 0.0, []
    while elapsed < until:
        pause = upkeep_pause(elapsed, pause)
        elapsed += pause
        looks.append(elapsed)
    return looks


def test_the_first_seconds_are_looked_at_often_then_less_and_less() -> None:
    looks = _looks(60.0)
    early = [t for t in looks if t <= UPKEEP_EARLY]
    assert len(early) == int(UPKEEP_EARLY / UPKEEP_FIRST)
    assert early[0] == UPKEEP_FIRST
    gaps = [b - a for a, b in itertools.pairwise(looks)]
    later = gaps[len(early) - 1 :]
    assert later == sorted(later)  # never more often again
    assert later[0] == 2 * UPKEEP_FIRST
    assert max(gaps) == UPKEEP_EVERY
    assert gaps[-1] == UPKEEP_EVERY


def test_a_shorter_upkeep_interval_caps_the_first_looks_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker, "UPKEEP_EVERY", 0.1)
    gaps = {round(b - a, 6) for a, b in itertools.pairwise(_looks(10.0))}
    assert gaps == {0.1}
