"""``trawl task pause|resume`` and ``trawl limits``: steering scheduling from outside."""

from __future__ import annotations

from typing import Any

import click

from trawl.cli import output
from trawl.cli.common import json_option, open_store
from trawl.store.scheduling import LimitRow


@click.group("task")
def task() -> None:
    """Pause or resume a task on every worker sharing the database."""


@task.command("pause")
@click.argument("name")
@click.option("--reason", metavar="TEXT", help="Shown by `trawl status`.")
def pause(name: str, reason: str | None) -> None:
    """Stop claims of task NAME (running attempts finish; nothing is lost)."""
    changed = open_store().pause_task(name, paused=True, reason=reason)
    click.echo(f"task {name} paused" if changed else f"task {name} was already paused")


@task.command("resume")
@click.argument("name")
def resume(name: str) -> None:
    """Let workers claim task NAME again (also after a max_failures stop).

    Resuming after a failure stop does not mark the failures handled: run
    `trawl failures handle --task NAME` first, or the next failure pauses it again.
    """
    changed = open_store().pause_task(name, paused=False)
    click.echo(f"task {name} resumed" if changed else f"task {name} was not paused")


@click.command("limits")
@json_option
def limits(as_json: bool) -> None:
    """Show each rate limit: its rate, the keys it tracks, how many are throttled
    now and how many jobs wait for a permit.

    Limits are registered by the workers that declare them. With --json:

    \b
    {"limits": [{"name": "shop", "rate_per_second": 5.0, "burst": 1,
                 "tasks": ["shop.*"], "keyed": true, "keys": 120,
                 "throttled_keys": 3, "waiting_jobs": 40}]}

    "tasks" is null for a global limit.
    """
    rows = open_store().limits()
    if as_json:
        output.print_json({"limits": [_limit_json(row) for row in rows]})
    elif not rows:
        click.echo("no rate limits registered (workers register the limits their app declares)")
    else:
        grid = output.table("limit", "rate", "burst", "tasks", "keys", "throttled", "waiting")
        for row in rows:
            grid.add_row(
                row.name,
                f"{row.rate:g}/s",
                str(row.burst),
                ", ".join(row.tasks) if row.tasks is not None else "(global)",
                f"{row.keys:,}" if row.keyed else "-",
                f"{row.throttled:,}",
                f"{row.waiting:,}",
            )
        output.print_table(grid)


def _limit_json(row: LimitRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "rate_per_second": row.rate,
        "burst": row.burst,
        "tasks": row.tasks,
        "keyed": row.keyed,
        "keys": row.keys,
        "throttled_keys": row.throttled,
        "waiting_jobs": row.waiting,
    }
