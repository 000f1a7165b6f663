"""``trawl pipeline``: remote workers' identities, tokens and routing."""

from __future__ import annotations

import sys
from typing import Any

import click

from trawl.cli import output
from trawl.cli.common import json_option, open_store
from trawl.model.records import PipelineRow
from trawl.store.pipelines import LOCKS, MAX_SLOTS, is_connected


def pipeline_json(row: PipelineRow, now: float) -> dict[str, Any]:
    return {
        "id": row.id,
        "tags": list(row.tags),
        "match_only": row.match_only,
        "slots": row.slots,
        "connected": is_connected(row, now),
        "server": row.server,
        "in_use": row.in_use,
        "draining": row.draining,
        "client_version": row.client_version,
        "disk_free": row.disk_free,
        "disk_total": row.disk_total,
        "crawl": row.crawl,
        "crawl_lock": row.crawl_lock,
        "crawl_slots": row.crawl_slots,
        **output.stamp("last_checkin", row.last_checkin),
        **output.stamp("connected_at", row.connected_at),
        **output.stamp("created_at", row.created_at),
        **output.stamp("token_rotated_at", row.token_rotated_at),
    }


@click.group("pipeline")
def pipeline() -> None:
    """Remote pipelines: workers and crawlers on other machines that claim work
    through `trawl serve` over a WebSocket, with an id and a token instead of the
    database's credentials (docs/pipelines.md).

    Routing: work with a pipeline tag (a task's pipeline_tag, a crawl's --tag)
    goes only to pipelines with that tag; a --match-only pipeline takes only
    such work; untagged work goes to the other pipelines.
    """


@pipeline.command("create")
@click.argument("pipeline_id", metavar="ID")
@click.option("--tag", "tags", multiple=True, help="A routing tag (repeatable).")
@click.option("--match-only", is_flag=True, help="Take only work routed to one of its tags.")
@click.option(
    "--slots",
    type=click.IntRange(1, MAX_SLOTS),
    default=4,
    show_default=True,
    help="Jobs the pipeline runs at once (a remote worker asks for at most this many).",
)
@json_option
def create(
    pipeline_id: str, tags: tuple[str, ...], match_only: bool, slots: int, as_json: bool
) -> None:
    """Make pipeline ID and print its token (shown only this once).

    ID: 1 to 64 letters, digits, '.', '_' or '-'. With --json, {"id", "token"}.

    \b
    trawl pipeline create scraper-eu --tag eu --slots 8 --json
    """
    store = open_store()
    token = store.pipelines.create(
        pipeline_id, tags=tags, match_only=match_only, slots=slots, now=store.clock()
    )
    if as_json:
        output.print_json({"id": pipeline_id, "token": token})
        return
    click.echo(token)
    if sys.stderr.isatty():
        click.echo(
            f"pipeline {pipeline_id!r}: store its token now, it is not shown again", err=True
        )


@pipeline.command("list")
@json_option
def list_pipelines(as_json: bool) -> None:
    """Pipelines with their routing, whether connected, slots in use, last
    check-in, client version and disk free.

    With --json, a list of the objects `trawl pipeline show --json` prints:
    [{"id", "tags", "slots", "connected", "in_use", "last_checkin", ...}].
    """
    store = open_store()
    now = store.clock()
    rows = store.pipelines.list()
    if as_json:
        output.print_json([pipeline_json(r, now) for r in rows])
        return
    grid = output.table("id", "tags", "slots", "connected", "last check-in", "version", "disk free")
    for r in rows:
        grid.add_row(
            r.id,
            ",".join(r.tags) + (" (match only)" if r.match_only else ""),
            f"{r.in_use}/{r.slots}" + (" draining" if r.draining else ""),
            (r.server or "yes") if is_connected(r, now) else "no",
            output.relative(r.last_checkin, now, never="never"),
            r.client_version or "-",
            _bytes(r.disk_free),
        )
    output.print_table(grid)


@pipeline.command("show")
@click.argument("pipeline_id", metavar="ID")
@json_option
def show(pipeline_id: str, as_json: bool) -> None:
    """One pipeline. With --json: {"id", "tags", "match_only", "slots", "connected",
    "server", "in_use", "draining", "client_version", "disk_free", "disk_total",
    "crawl", "crawl_lock", "crawl_slots", "last_checkin", "connected_at", "created_at",
    "token_rotated_at"} (times with *_epoch twins)."""
    store = open_store()
    row = store.pipelines.require(pipeline_id)
    shown = pipeline_json(row, store.clock())
    if as_json:
        output.print_json(shown)
        return
    for key, value in shown.items():
        if not key.endswith("_epoch"):
            click.echo(f"{key}: {value}")


@pipeline.command("update")
@click.argument("pipeline_id", metavar="ID")
@click.option("--tag", "add", multiple=True, help="Add a routing tag (repeatable).")
@click.option("--untag", "remove", multiple=True, help="Remove a routing tag (repeatable).")
@click.option("--match-only/--no-match-only", default=None, help="Take only tagged work, or not.")
@click.option("--slots", type=click.IntRange(1, MAX_SLOTS), help="Jobs it runs at once.")
def update(
    pipeline_id: str,
    add: tuple[str, ...],
    remove: tuple[str, ...],
    match_only: bool | None,
    slots: int | None,
) -> None:
    """Change a pipeline's tags, match-only flag or slots; its next claim obeys (a
    removed tag makes that work ineligible at once)."""
    store = open_store()
    row = store.pipelines.update(
        pipeline_id, add_tags=add, remove_tags=remove, match_only=match_only, slots=slots
    )
    output.print_json(pipeline_json(row, store.clock()))


@pipeline.command("pin")
@click.argument("pipeline_id", metavar="ID")
@click.argument("crawl_id", metavar="CRAWL", type=int)
@click.option(
    "--until",
    "lock",
    type=click.Choice(LOCKS),
    default="finished",
    show_default=True,
    help="Lift the pin when the crawl finishes, or only when unpinned.",
)
@click.option(
    "--slots",
    type=click.IntRange(1, MAX_SLOTS),
    help="Pin this many of its slots; the rest stay routed by its tags [default: all].",
)
def pin(pipeline_id: str, crawl_id: int, lock: str, slots: int | None) -> None:
    """Hold pipeline ID's slots (or --slots of them) to crawl CRAWL's pages, whatever its
    tags say: pinned slots take only that crawl's pages, and wait for it when it has
    none due."""
    store = open_store()
    row = store.pipelines.pin(pipeline_id, crawl_id, lock, slots)
    output.print_json(pipeline_json(row, store.clock()))


@pipeline.command("unpin")
@click.argument("pipeline_id", metavar="ID")
def unpin(pipeline_id: str) -> None:
    """Route pipeline ID by its tags again."""
    store = open_store()
    output.print_json(pipeline_json(store.pipelines.pin(pipeline_id, None), store.clock()))


@pipeline.command("rotate-token")
@click.argument("pipeline_id", metavar="ID")
def rotate_token(pipeline_id: str) -> None:
    """Give pipeline ID a new token and print it (shown only this once). The old
    token stops working: a session open with it is closed within 10 seconds."""
    store = open_store()
    click.echo(store.pipelines.rotate(pipeline_id, store.clock()))


@pipeline.command("delete")
@click.argument("pipeline_id", metavar="ID")
def delete(pipeline_id: str) -> None:
    """Delete pipeline ID: its token stops working; jobs it holds come back when their
    leases lapse."""
    store = open_store()
    if not store.pipelines.delete(pipeline_id):
        raise click.ClickException(
            f"no pipeline is named {pipeline_id!r} (see: trawl pipeline list)"
        )
    click.echo(f"deleted pipeline {pipeline_id!r}", err=True)


def _bytes(count: int | None) -> str:
    if count is None:
        return "-"
    size, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
