"""The Software Heritage interval arithmetic, cooldowns and the disable rule, table-driven."""

import random

import pytest

import trawl
from trawl.engine import revisit
from trawl.engine.revisit import Cooldowns
from trawl.model.errors import InvalidInput

DAY = 86400.0


@pytest.mark.parametrize(
    ("offset", "eventful", "after"),
    [
        (0, True, 0),  # clamped at 0
        (1, True, 0),
        (5, True, 3),
        (10, True, 8),
        (0, False, 1),
        (4, False, 5),
        (9, False, 10),
        (10, False, 10),  # clamped at 10
    ],
)
def test_offset_moves_minus_two_on_eventful_plus_one_on_uneventful(
    offset: int, eventful: bool, after: int
) -> None:
    assert revisit.next_offset(offset, eventful) == after


@pytest.mark.parametrize(
    ("offset", "days"),
    [(0, 1), (1, 1), (2, 2), (3, 2), (4, 2), (5, 4), (6, 16), (7, 64), (10, 4096)],
)
def test_offset_maps_to_days_as_swh_does(offset: int, days: float) -> None:
    assert revisit.offset_days(offset) == days


def test_interval_scales_days_geometrically_into_min_max() -> None:
    policy = trawl.adaptive(min="1h", max="64h")
    assert revisit.interval(policy, 0) == pytest.approx(3600)
    assert revisit.interval(policy, 1) == pytest.approx(3600)
    assert revisit.interval(policy, 10) == pytest.approx(64 * 3600)
    # each SWH step of x4 days is one sixth of the way (in log terms) from min to max
    assert revisit.interval(policy, 5) == pytest.approx(3600 * 64 ** (1 / 6))
    widening = [revisit.interval(policy, o) for o in range(11)]
    assert widening == sorted(widening)


def test_uneventful_visits_widen_the_interval_eventful_ones_narrow_it() -> None:
    policy = trawl.adaptive(min="1h", max="30d")
    offset, intervals = 0, []
    for _ in range(8):
        offset = revisit.next_offset(offset, eventful=False)
        intervals.append(revisit.interval(policy, offset))
    assert intervals == sorted(intervals)
    assert intervals[-1] > intervals[0]
    narrowed = revisit.interval(policy, revisit.next_offset(offset, eventful=True))
    assert narrowed < intervals[-1]


def test_jitter_is_ten_percent_both_ways() -> None:
    rng = random.Random(3)
    values = [revisit.jittered(100.0, rng) for _ in range(500)]
    assert min(values) >= 90.0
    assert max(values) <= 110.0
    assert min(values) < 93.0
    assert max(values) > 107.0


@pytest.mark.parametrize(
    ("previous", "delay"), [(0, 31 * DAY), (1, 31 * DAY), (2, None), (5, None)]
)
def test_not_found_waits_its_cooldown_then_disables_after_three(
    previous: int, delay: float | None
) -> None:
    assert revisit.not_found_delay(Cooldowns(), previous) == delay


def test_policy_bounds_are_checked() -> None:
    with pytest.raises(InvalidInput, match="min <= max"):
        trawl.adaptive(min="2d", max="1d")
    with pytest.raises(InvalidInput, match="min <= max"):
        trawl.adaptive(min=0, max="1d")


def test_adaptive_tasks_default_to_swh_cooldowns_and_weights() -> None:
    app = trawl.App()

    @app.task(revisit=trawl.adaptive(min="1h", max="30d"))
    def visit(ctx: trawl.Context) -> None: ...

    @app.task(name="plain")
    def plain(ctx: trawl.Context) -> None: ...

    schedule = app.get("visit").schedule
    assert schedule.cooldowns.exhausted == 14 * DAY
    assert schedule.cooldowns.not_found == 31 * DAY
    assert schedule.visit_weights == (40.0, 40.0, 20.0)
    assert app.get("plain").schedule.cooldowns.exhausted is None
    assert app.get("plain").schedule.visit_weights is None
