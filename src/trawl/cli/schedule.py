"""``trawl schedule``: recurring crawls and commands on a cron, run by the workers."""

from __future__ import annotations

import time
from typing import Any

import click

from trawl.cli import output
from trawl.cli.common import json_option, open_store
from trawl.engine import edit
from trawl.model import effects as fx
from trawl.model.errors import InvalidInput, ItemNotFound
from trawl.model.records import NewItem
from trawl.runtime import recurring
from trawl.runtime.app import App
from trawl.runtime.recurring import Recurring
from trawl.store.store import Store

BY = "trawl schedule"


@click.group("schedule")
def schedule() -> None:
    """Run a crawl or a command on a cron, durably.

    \b
    trawl schedule add nightly --cron "0 3 * * *" --tz Europe/Paris \\
          -- crawl https://example.org/ --depth 2

    A schedule is a job of the built-in task trawl.schedule, so whatever runs
    your app (`trawl run`, `trawl worker`) runs it, leased and fenced like any
    job. Runs missed while nothing was running are coalesced into one, and
    the run says how many; a crawl is started in the background, and a fire
    while the crawl the schedule started last is still running is skipped
    (and recorded). Actions: crawl, add, expire (any of those command lines).
    """


@schedule.command("add", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option("--cron", "cron", required=True, metavar="EXPR", help='e.g. "0 3 * * *".')
@click.option(
    "--tz", default="UTC", show_default=True, metavar="ZONE", help="IANA time zone of EXPR."
)
@click.argument("action", nargs=-1, required=True, type=click.UNPROCESSED)
def add(name: str, cron: str, tz: str, action: tuple[str, ...]) -> None:
    """Add schedule NAME running `trawl ACTION...` at each fire of EXPR.

    Put the action after `--`, e.g. `-- crawl https://example.org/ --depth 2`.
    The first run is at the next fire time after now.
    """
    spec = recurring.make(name, cron, tz, action, time.time())
    store = open_store()
    store.register_tasks([App().get(recurring.TASK).info()])
    created = store.add_items(
        [NewItem(id=spec.item_id, tags=((recurring.TAG, None),), data=spec.to_data())],
        created_by=BY,
    )
    if not created:
        raise InvalidInput(f"schedule {name!r} exists: `trawl schedule delete {name}` first")
    when = _iso(recurring.next_fire(cron, tz, time.time()))
    click.echo(f"schedule {name}: `{spec.command()}` next at {when}")


@schedule.command("list")
@json_option
def list_schedules(as_json: bool) -> None:
    """List schedules: cron, zone, paused, the last run's outcome, the next fire.

    With --json: {"schedules": [<as `trawl schedule show --json`>, ...]}
    """
    store = open_store()
    found = [_view(store, spec) for spec in _all(store)]
    if as_json:
        output.print_json({"schedules": found})
    elif not found:
        click.echo("no schedules: `trawl schedule add NAME --cron EXPR -- ACTION...` adds one")
    else:
        grid = output.table("NAME", "CRON", "TZ", "PAUSED", "LAST", "NEXT", "COMMAND")
        for s in found:
            paused = "yes" if s["paused"] else ""
            cells = (s["name"], s["cron"], s["tz"], paused, s["last_outcome"], s["next_at"])
            grid.add_row(*(c or "" for c in cells), s["command"])
        output.print_table(grid)


@schedule.command("show")
@click.argument("name")
@json_option
def show(name: str, as_json: bool) -> None:
    """Show schedule NAME and what its last run did.

    With --json: {"name", "cron", "tz", "command", "action": [...], "paused",
    "next_at", "last_run_at", "last_outcome", "coalesced", "crawl", "error"}
    """
    store = open_store()
    view = _view(store, _get(store, name))
    if as_json:
        output.print_json(view)
        return
    for key, value in view.items():
        if value not in (None, "", []):
            click.echo(f"{key:>13}: {value}")


@schedule.command("pause")
@click.argument("name")
def pause(name: str) -> None:
    """Stop NAME from acting (fires while paused are dropped, not saved up)."""
    _set(name, paused=True)
    click.echo(f"schedule {name} paused")


@schedule.command("resume")
@click.argument("name")
def resume(name: str) -> None:
    """Let NAME act again from its next fire time."""
    _set(name, paused=False)
    click.echo(f"schedule {name} resumed")


@schedule.command("run-now")
@click.argument("name")
def run_now(name: str) -> None:
    """Run NAME's action as soon as a worker takes it (its cron is unchanged)."""
    store = open_store()
    spec = _get(store, name)
    bump = fx.UpdateData(id=spec.item_id, fn=lambda old: old | {"run_now": spec.run_now + 1})
    edit.apply(store, [bump, fx.Expire(id=spec.item_id, task=recurring.TASK)], by=BY)
    click.echo(f"schedule {name}: due now")


@schedule.command("delete")
@click.argument("name")
def delete(name: str) -> None:
    """Delete schedule NAME (a crawl it started goes on)."""
    store = open_store()
    edit.apply(store, [fx.DeleteItem(id=_get(store, name).item_id)], by=BY)
    click.echo(f"schedule {name} deleted")


def _set(name: str, *, paused: bool) -> None:
    store = open_store()
    spec = _get(store, name)
    edit.apply(
        store, [fx.UpdateData(id=spec.item_id, fn=lambda old: old | {"paused": paused})], by=BY
    )


def _get(store: Store, name: str) -> Recurring:
    item = store.get_item(recurring.PREFIX + name)
    if item is None or recurring.TAG not in item.tags:
        raise ItemNotFound(f"no schedule is named {name!r}: `trawl schedule list` shows them")
    return Recurring.from_data(item.id, item.data)


def _all(store: Store) -> list[Recurring]:
    found: list[Recurring] = []
    after = ""
    while ids := store.tagged(recurring.TAG, after=after):
        for item_id in ids:
            item = store.get_item(item_id)
            if item is not None:
                found.append(Recurring.from_data(item.id, item.data))
        after = ids[-1]
    return found


def _view(store: Store, spec: Recurring) -> dict[str, Any]:
    last = store.get_metadata(recurring.TASK, spec.item_id) or {}
    next_at = last.get("next_at") or recurring.next_fire(spec.cron, spec.tz, time.time())
    return {
        "name": spec.name,
        "cron": spec.cron,
        "tz": spec.tz,
        "command": spec.command(),
        "action": list(spec.action),
        "paused": spec.paused,
        "next_at": _iso(next_at),
        "last_run_at": _iso(last.get("ran_at")),
        "last_outcome": last.get("outcome"),
        "coalesced": last.get("coalesced", 0),
        "crawl": last.get("crawl"),
        "error": last.get("error"),
    }


def _iso(at: float | None) -> str | None:
    return output.iso(at) if at is not None else None
