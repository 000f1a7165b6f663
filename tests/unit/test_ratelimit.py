import random

import pytest

import trawl
from trawl.engine.ratelimit import decide
from trawl.model.errors import InvalidInput
from trawl.model.limits import make_limit, parse_rate


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("20/s", 20.0),
        ("5/m", 5 / 60),
        ("100/h", 100 / 3600),
        ("1/10s", 0.1),
        ("3/2m", 3 / 120),
        (2.5, 2.5),
    ],
)
def test_rates(text: str, rate: float) -> None:
    assert parse_rate(text) == pytest.approx(rate)


@pytest.mark.parametrize("bad", ["fast", "0/s", "5/x", "-1/s", "/s", 0])
def test_bad_rates_say_how_to_write_one(bad: object) -> None:
    with pytest.raises(InvalidInput):
        parse_rate(bad)  # type: ignore[arg-type]


def test_smooth_by_default_one_permit_per_interval() -> None:
    first = decide(None, 100.0, 0.05, 1)
    assert first.allowed
    assert first.tat == pytest.approx(100.05)
    second = decide(first.tat, 100.01, 0.05, 1)
    assert not second.allowed
    assert second.at == pytest.approx(100.05)
    third = decide(first.tat, 100.05, 0.05, 1)
    assert third.allowed


def test_burst_allows_that_many_at_once_then_the_rate() -> None:
    tat, granted = None, 0
    for _ in range(10):
        d = decide(tat, 0.0, 1.0, 3)
        if d.allowed:
            granted += 1
            tat = d.tat
    assert granted == 3
    assert decide(tat, 1.0, 1.0, 3).allowed  # one interval later, one more


def test_an_idle_key_does_not_bank_permits_past_its_burst() -> None:
    d = decide(10.0, 1000.0, 1.0, 1)  # long idle
    assert d.allowed
    assert d.tat == pytest.approx(1001.0)
    assert not decide(d.tat, 1000.0, 1.0, 1).allowed


def test_which_tasks_a_limit_covers() -> None:
    group = make_limit("shop", "5/s", tasks=["shop.*"])
    assert group.applies_to("shop.prices", exempt_global=True)
    assert not group.applies_to("other", exempt_global=False)
    everything = make_limit("all", "100/s")
    assert everything.applies_to("other", exempt_global=False)
    assert not everything.applies_to("other", exempt_global=True)


def test_app_limits_and_task_limits_combine() -> None:
    app = trawl.App()
    app.limit("global", "100/s")
    app.limit("shop", "5/s", tasks=["shop.*"], key=lambda item: item.data["host"])

    @app.task(name="shop.prices", rate_limit="20/s")
    def prices(ctx: trawl.Context) -> None: ...

    @app.task(name="other", exempt_global=True)
    def other(ctx: trawl.Context) -> None: ...

    assert [lim.name for lim in app.limits_for(app.get("shop.prices"))] == [
        "task:shop.prices",
        "global",
        "shop",
    ]
    assert app.limits_for(app.get("other")) == []


def test_bad_limit_declarations() -> None:
    app = trawl.App()
    app.limit("a", "1/s")
    with pytest.raises(InvalidInput, match="declared twice"):
        app.limit("a", "1/s")
    with pytest.raises(InvalidInput, match="burst"):
        app.limit("b", "1/s", burst=0)
    with pytest.raises(InvalidInput, match="list of patterns"):
        app.limit("c", "1/s", tasks="shop.*")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="depend on itself"):
        app.task(name="x", depends_on=["x"])(lambda ctx: None)
    with pytest.raises(InvalidInput, match="max_failures"):
        app.task(name="y", max_failures=0)(lambda ctx: None)


def test_a_permit_taken_late_keeps_its_place_so_latency_does_not_lower_the_rate() -> None:
    rng = random.Random(7)
    interval, tat, grants = 0.05, 100.0, []
    for _ in range(2000):  # each claim arrives up to one interval after its permit fell due
        now = tat + rng.uniform(0.0, interval * 0.99)
        d = decide(tat, now, interval, 1)
        assert d.allowed
        grants.append(now)
        tat = d.tat
    rate = (len(grants) - 1) / (grants[-1] - grants[0])
    assert rate == pytest.approx(1 / interval, rel=0.01)
    most, left = 0, 0
    for right, t in enumerate(grants):  # and no second holds more than the rate plus one
        while t - grants[left] >= 1.0:
            left += 1
        most = max(most, right - left + 1)
    assert most <= 1 / interval + 1
