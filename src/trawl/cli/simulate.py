"""``trawl simulate APP``: a task's scheduling over simulated days, policy against policy."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from trawl.cli import output
from trawl.cli.chart import sparklines
from trawl.cli.common import duration
from trawl.runtime.loader import load_app
from trawl.runtime.simulation.report import Day, PolicyReport
from trawl.runtime.simulation.simulator import SimSpec, simulate, task_of
from trawl.runtime.simulation.variants import HELP, Variant, parse
from trawl.runtime.simulation.world import WorldSpec

_DAY_HEADER = f"{'policy':<18} {'day':>4} {'visits':>9} {'changed':>9} {'failed':>7} " + (
    f"{'fresh':>7} {'stale h':>8} {'queue':>9}"
)


def _rate(ctx: click.Context, param: click.Parameter, value: str) -> float:
    """A rate per day: ``0.5``, or a fraction such as ``1/3650``."""
    try:
        top, _, bottom = value.partition("/")
        rate = float(top) / float(bottom) if bottom else float(top)
    except (ValueError, ZeroDivisionError):
        raise click.BadParameter(f"{value!r} is not a number of changes per day") from None
    if rate <= 0:
        raise click.BadParameter(f"{value!r}: a rate must be positive")
    return rate


def _policy(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[Variant]:
    try:
        return [parse(v) for v in values or ("app",)]
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@click.command("simulate")
@click.argument("app_spec", metavar="APP")
@click.option("--items", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--days", type=click.IntRange(min=1), default=30, show_default=True)
@click.option(
    "--policy",
    "variants",
    multiple=True,
    callback=_policy,
    help=f"The revisit policy; repeat to compare: {HELP}. [default: app]",
)
@click.option("--task", metavar="TASK", help="The task to simulate (if APP declares several).")
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same report.")
@click.option(
    "--capacity",
    type=click.FloatRange(min=0, min_open=True),
    help="Visits per day the workers can make [default: one per item].",
)
@click.option("--step", metavar="DURATION", callback=duration, default="10m", show_default=True,
              help="Simulated time between claims.")  # fmt: skip
@click.option("--min-rate", callback=_rate, default="1/3650", show_default=True,
              help="Changes per day of the items that change least.")  # fmt: skip
@click.option("--max-rate", callback=_rate, default="2", show_default=True,
              help="Changes per day of those that change most (log-uniform between).")  # fmt: skip
@click.option("--failure-rate", type=click.FloatRange(0, 1, max_open=True), default=0.01,
              show_default=True, help="Share of visits that fail (and are retried).")  # fmt: skip
@click.option("--not-found-rate", type=click.FloatRange(0, 1, max_open=True), default=0.001,
              show_default=True, help="Share of visits that find the item gone.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON (shape described above).")
def simulate_command(
    app_spec: str,
    items: int,
    days: int,
    variants: list[Variant],
    task: str | None,
    seed: int,
    capacity: float | None,
    step: float,
    min_rate: float,
    max_rate: float,
    failure_rate: float,
    not_found_rate: float,
    as_json: bool,
) -> None:
    """Simulate a task of APP for --days on --items simulated sources.

    The real scheduling code runs on a throwaway database with a simulated clock:
    claims with the task's visit policy and rate limits, adaptive revisits and
    their jitter, retries, not-found cooldowns. The task's function is not
    called: each item changes at its own rate (log-uniform between --min-rate
    and --max-rate changes a day), and a visit fails or finds the item gone at
    the given rates. Each --policy runs against the same simulated sources.

    Per day: visits, visits that found a change, failures, the share of items
    whose latest version we hold (fresh), the mean time since their first
    unseen change (stale h, over all items), and the jobs due and not run at
    the end of the day (queue). Then per policy: fresh share averaged over the
    days, and freshness per visit (the mean number of items fresh divided by
    the visits made per day), and a chart of both.

    With --json, prints one object:

    \b
    {"policies": [{"policy": "fixed:1d", "visits": 59752, "fresh": 0.91,
                   "staleness_hours": 2.3, "freshness_per_visit": 0.91,
                   "days": [{"day": 1, "visits": 2000, "changed": 1972,
                             "failed": 28, "fresh": 0.83, "staleness": 1.8,
                             "queue": 41}, ...]}]}
    """
    app = load_app(app_spec)
    chosen = task_of(app, task)
    world = WorldSpec(
        items=items,
        seed=seed,
        min_rate=min_rate,
        max_rate=max_rate,
        failure_rate=failure_rate,
        not_found_rate=not_found_rate,
    )
    spec = SimSpec(world=world, days=days, capacity=capacity, step=step)
    if not as_json:
        click.echo(_DAY_HEADER)
    reports = [
        simulate(app, chosen, variant, spec, None if as_json else _printer(variant.name))
        for variant in variants
    ]
    if as_json:
        output.print_json({"policies": [_json(r) for r in reports]})
        return
    _summary(reports)


def _printer(policy: str) -> Any:
    def show(day: Day) -> None:
        click.echo(
            f"{policy:<18} {day.day:>4} {day.visits:>9,} {day.changed:>9,} {day.failed:>7,} "
            f"{day.fresh:>7.1%} {day.staleness:>8.1f} {day.queue:>9,}"
        )

    return show


def _summary(reports: list[PolicyReport]) -> None:
    click.echo()
    grid = output.table("policy", "visits", "visits/day", "fresh", "stale h", "fresh per visit")
    for column in grid.columns[1:]:
        column.justify = "right"
    for r in reports:
        grid.add_row(
            r.policy, f"{r.visits:,}", f"{r.visits / len(r.days):,.0f}", f"{r.fresh:.1%}",
            f"{r.staleness:.1f}", f"{r.freshness_per_visit:.3f}",
        )  # fmt: skip
    output.print_table(grid)
    click.echo("\nfresh share per day")
    for line in sparklines({r.policy: [d.fresh for d in r.days] for r in reports}, "{:.0%}"):
        click.echo(f"  {line}")
    click.echo("visits per day")
    for line in sparklines({r.policy: [d.visits for d in r.days] for r in reports}, "{:,.0f}"):
        click.echo(f"  {line}")


def _json(r: PolicyReport) -> dict[str, Any]:
    return {
        "policy": r.policy,
        "visits": r.visits,
        "fresh": r.fresh,
        "staleness_hours": r.staleness,
        "freshness_per_visit": r.freshness_per_visit,
        "days": [dataclasses.asdict(d) for d in r.days],
    }
