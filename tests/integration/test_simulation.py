"""``trawl simulate``: the real scheduling code over simulated days. The same seed gives the
same report; the adaptive policy buys more freshness per visit than a fixed interval when
change rates are skewed; rate limits hold in simulated time; bad input is refused."""

from __future__ import annotations

import pytest

import trawl
from trawl.model.errors import InvalidInput
from trawl.runtime.simulation.simulator import SimSpec, simulate, task_of
from trawl.runtime.simulation.variants import parse
from trawl.runtime.simulation.world import WorldSpec

pytestmark = pytest.mark.slow


def make_app() -> trawl.App:
    app = trawl.App("sqlite:///unused.db")

    @app.task(tags=["repo"], revisit=trawl.adaptive(min="1d", max="64d"))
    def visit(ctx: trawl.Context) -> None: ...

    return app


def run(policy: str, *, seed: int = 1, items: int = 600, days: int = 12, **world: float):
    app = make_app()
    spec = SimSpec(world=WorldSpec(items=items, seed=seed, **world), days=days, step=1800.0)
    return simulate(app, app.get("visit"), parse(policy), spec)


def test_the_same_seed_gives_the_same_report() -> None:
    first, again, other = run("app"), run("app"), run("app", seed=2)
    assert first.days == again.days
    assert first.days != other.days


def test_adaptive_beats_a_fixed_interval_on_freshness_per_visit() -> None:
    # Skewed rates: from once in ten years to twice a day, log-uniform.
    fixed = run("fixed:1d", items=1000, days=20)
    adaptive = run("adaptive:1d:64d", items=1000, days=20)
    print(
        f"fixed:1d {fixed.visits} visits, {fixed.fresh:.3f} fresh,"
        f" {fixed.freshness_per_visit:.3f}/visit; adaptive:1d:64d {adaptive.visits} visits,"
        f" {adaptive.fresh:.3f} fresh, {adaptive.freshness_per_visit:.3f}/visit"
    )
    assert adaptive.freshness_per_visit > 1.3 * fixed.freshness_per_visit
    assert adaptive.visits < 0.8 * fixed.visits
    assert adaptive.fresh > fixed.fresh - 0.1  # not bought by letting everything go stale


def test_a_rate_limit_holds_in_simulated_time() -> None:
    app = trawl.App("sqlite:///unused.db")

    @app.task(tags=["repo"], ttl="1h", rate_limit="100/h")
    def poll(ctx: trawl.Context) -> None: ...

    world = WorldSpec(items=500, failure_rate=0, not_found_rate=0)
    spec = SimSpec(world=world, days=2, capacity=10_000)  # the workers could do far more
    report = simulate(app, app.get("poll"), parse("app"), spec)
    # 100 an hour (a permit at the start of the hour too), however many are due
    assert all(2400 <= d.visits <= 2401 for d in report.days), report.days
    assert report.days[-1].queue > 0  # the rest wait their turn


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("weekly", "unknown policy 'weekly'"),
        ("fixed:", "unknown policy 'fixed:'"),
        ("fixed:soon", "policy 'fixed:soon'"),
        ("fixed:0s", "the interval must be positive"),
        ("adaptive:1d", "unknown policy 'adaptive:1d'"),
        ("adaptive:2d:1d", "adaptive revisit needs 0 < min <= max"),
    ],
)
def test_bad_policies_are_refused(policy: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse(policy)


@pytest.mark.parametrize(
    ("world", "message"),
    [
        ({"items": 0}, "simulate at least one item"),
        ({"items": 5, "min_rate": 2.0, "max_rate": 1.0}, "change rates need 0 < min <= max"),
        ({"items": 5, "failure_rate": 1.5}, r"failure rate must be in \[0, 1\)"),
        ({"items": 5, "failure_rate": 0.6, "not_found_rate": 0.5}, "add up to less than 1"),
    ],
)
def test_bad_worlds_are_refused(world: dict[str, float], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        WorldSpec(**world)  # type: ignore[arg-type]


def test_the_task_must_be_named_when_the_app_has_several() -> None:
    app = make_app()
    app.task(name="other", tags=["repo"])(lambda ctx: None)
    with pytest.raises(InvalidInput, match=r"name the task to simulate with --task .*visit, other"):
        task_of(app, None)
    assert task_of(app, "other").name == "other"
