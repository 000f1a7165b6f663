"""``trawl journal``: every committed change, in order, from a cursor; optionally followed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from trawl.cli import output
from trawl.cli.common import json_option, open_store
from trawl.model.records import JournalEntry
from trawl.store.store import Store

DEFAULT_LIMIT = 1000
PAGE = 1000
FOLLOW_POLL = 0.5  # seconds between looks for new entries with --follow

Printer = Callable[[JournalEntry], None]


@click.command("journal")
@click.option(
    "--since",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="SEQ",
    help="Start after this sequence number.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help=f"Print at most this many entries [default: {DEFAULT_LIMIT}; no limit with --follow].",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new entries until Ctrl-C.")
@json_option
def journal(since: int, limit: int | None, follow: bool, as_json: bool) -> None:
    """Print journal entries after --since, oldest first.

    Each entry has a sequence number; pass the last one you saw as --since to
    read on from there. With --follow, waits for new entries (looking every
    half second) until interrupted.

    With --json, prints one JSON object a line (JSON Lines):

    \b
    {"seq": 12, "at": "2024-05-01T12:00:00.000Z", "at_epoch": 1714564800.0,
     "kind": "job.done", "item_id": "sku:1", "task": "price", "detail": {...}}
    """
    store = open_store()
    printer: Printer = _print_json if as_json else _print_text
    if follow:
        _follow(store, since, limit, printer)
        return
    limit = limit or DEFAULT_LIMIT
    entries = store.journal(since, limit)
    for entry in entries:
        printer(entry)
    if len(entries) == limit:
        click.echo(f"(more entries: trawl journal --since {entries[-1].seq})", err=True)


def _follow(store: Store, cursor: int, limit: int | None, printer: Printer) -> None:
    left = limit
    try:
        while True:
            size = PAGE if left is None else min(PAGE, left)
            entries = store.journal(cursor, size)
            for entry in entries:
                printer(entry)
                cursor = entry.seq
            if left is not None:
                left -= len(entries)
                if left <= 0:
                    return
            if len(entries) < size:
                time.sleep(FOLLOW_POLL)
    except KeyboardInterrupt:
        return  # Ctrl-C is how a follow ends


def entry_json(entry: JournalEntry) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        **output.stamp("at", entry.at),
        "kind": entry.kind,
        "item_id": entry.item_id,
        "task": entry.task,
        "detail": entry.detail,
    }


def _print_json(entry: JournalEntry) -> None:
    output.print_json_line(entry_json(entry))


def _print_text(entry: JournalEntry) -> None:
    detail = "" if entry.detail is None else output.compact_json(entry.detail)
    fields = (
        f"{entry.seq:>7}",
        output.iso(entry.at) or "",
        f"{entry.kind:<16}",
        entry.task or "-",
        entry.item_id or "-",
        detail,
    )
    click.echo("  ".join(fields).rstrip())
