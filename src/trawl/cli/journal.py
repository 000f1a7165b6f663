"""``trawl journal``: every committed change, in order, from a cursor; optionally followed;
named consumers that acknowledge what they processed; pruning."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

import click

from trawl.cli import output
from trawl.cli.common import json_option, open_store
from trawl.model.durations import seconds
from trawl.model.errors import InvalidDuration, InvalidInput
from trawl.model.records import JournalEntry
from trawl.store.store import Store

DEFAULT_LIMIT = 1000
PAGE = 1000
FOLLOW_POLL = 0.5  # seconds between looks for new entries with --follow

Printer = Callable[[JournalEntry], None]


@click.group("journal", invoke_without_command=True)
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
@click.pass_context
def journal(ctx: click.Context, since: int, limit: int | None, follow: bool, as_json: bool) -> None:
    """Print journal entries after --since, oldest first; or work with named
    consumers (consume, ack, consumers, forget) and retention (prune).

    Each entry has a sequence number; pass the last one you saw as --since to
    read on from there. With --follow, waits for new entries (looking every
    half second) until interrupted.

    With --json, prints one JSON object a line (JSON Lines):

    \b
    {"seq": 12, "at": "2024-05-01T12:00:00.000Z", "at_epoch": 1714564800.0,
     "kind": "job.done", "item_id": "sku:1", "task": "price", "detail": {...}}
    """
    if ctx.invoked_subcommand is not None:
        return
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


# -- named consumers ------------------------------------------------------------------------


@journal.command("consume")
@click.argument("name")
@click.option(
    "--exec",
    "command",
    metavar="COMMAND",
    help="Pipe each page (JSON Lines) into this shell command; acknowledge it only if the"
    " command exits 0.",
)
@click.option(
    "--start",
    type=click.Choice(["beginning", "end"]),
    default="beginning",
    show_default=True,
    help="Where a consumer named for the first time starts.",
)
@click.option("--page", type=click.IntRange(1, 10_000), default=PAGE, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), help="Stop after this many entries.")
@click.option("--follow", "-f", is_flag=True, help="Keep consuming new entries until Ctrl-C.")
@click.option("--no-ack", is_flag=True, help="Only show what the consumer would get; move nothing.")
@json_option
def consume(
    name: str,
    command: str | None,
    start: str,
    page: int,
    limit: int | None,
    follow: bool,
    no_ack: bool,
    as_json: bool,
) -> None:
    """Read the journal as the consumer NAME, from after its last acknowledgement.

    Without --exec, prints the entries (as `trawl journal` does) and acknowledges
    each page once it is written out. With --exec, each page goes to COMMAND's
    stdin as JSON Lines and is acknowledged only when COMMAND exits 0; on any
    other exit the position stays, the command exits 1, and the next run gets the
    same entries again (at-least-once: make processing idempotent, a seq is a
    natural key).

    With --json (printed, or piped to --exec), one object a line, as `trawl
    journal --json` prints them:

    \b
    {"seq": 12, "at": "2024-05-01T12:00:00.000Z", "at_epoch": 1714564800.0,
     "kind": "job.done", "item_id": "sku:1", "task": "price", "detail": {...}}

    \b
    trawl journal consume indexer --exec 'python index.py' --follow
    """
    store = open_store()
    printer: Printer = _print_json if as_json else _print_text
    position = store.consumers.position(name, store.clock(), start=_start(start))
    left = limit
    try:
        while left is None or left > 0:
            size = page if left is None else min(page, left)
            entries = store.journal(position, size)
            if not entries:
                if not follow:
                    return
                time.sleep(FOLLOW_POLL)
                continue
            if command is not None:
                _run(command, entries)
            else:
                for entry in entries:
                    printer(entry)
                sys.stdout.flush()  # written out before it counts as acknowledged
            if not no_ack:
                store.consumers.ack(name, entries[-1].seq, store.clock())
            position = entries[-1].seq
            if left is not None:
                left -= len(entries)
    except KeyboardInterrupt:
        return  # what was acknowledged stays acknowledged


def _start(value: str) -> Literal["beginning", "end"]:
    return "end" if value == "end" else "beginning"


def _run(command: str, entries: list[JournalEntry]) -> None:
    lines = "".join(output.compact_json(entry_json(e)) + "\n" for e in entries)
    done = subprocess.run(command, shell=True, input=lines.encode(), check=False)
    if done.returncode != 0:
        raise click.ClickException(
            f"{command!r} exited {done.returncode} on entries {entries[0].seq}..{entries[-1].seq};"
            " they are not acknowledged"
        )


@journal.command("ack")
@click.argument("name")
@click.argument("seq", type=click.IntRange(min=0))
def ack(name: str, seq: int) -> None:
    """Acknowledge that consumer NAME processed every entry up to SEQ (a position never
    moves back)."""
    store = open_store()
    position = store.consumers.ack(name, seq, store.clock())
    click.echo(f"consumer {name!r} is at seq {position}", err=True)


@journal.command("consumers")
@json_option
def consumers(as_json: bool) -> None:
    """Named consumers: their position, lag (entries not yet acknowledged) and last ack.

    With --json, a list of {"name", "position", "lag", "created_at", "acked_at"}.
    """
    store = open_store()
    rows = store.consumers.list()
    if as_json:
        output.print_json(
            [
                {
                    "name": r.name,
                    "position": r.position,
                    "lag": r.lag,
                    **output.stamp("created_at", r.created_at),
                    **output.stamp("acked_at", r.acked_at),
                }
                for r in rows
            ]
        )
        return
    grid = output.table("consumer", "position", "lag", "last ack")
    now = store.clock()
    for r in rows:
        grid.add_row(r.name, str(r.position), str(r.lag), output.relative(r.acked_at, now))
    output.print_table(grid)


@journal.command("forget")
@click.argument("name")
def forget(name: str) -> None:
    """Delete consumer NAME (it no longer holds back pruning)."""
    store = open_store()
    if not store.consumers.delete(name):
        raise click.ClickException(f"no consumer is named {name!r} (see: trawl journal consumers)")
    click.echo(f"forgot consumer {name!r}", err=True)


@journal.command("prune")
@click.option(
    "--before",
    required=True,
    metavar="WHEN",
    help="Drop entries older than this: a duration ago (30d, 12h), an ISO date or time,"
    " or Unix seconds.",
)
@click.option("--force", is_flag=True, help="Drop them even if a consumer has not acked them.")
def prune(before: str, force: bool) -> None:
    """Delete old journal entries. Refused, naming them, while a consumer has not
    acknowledged what would go, unless --force."""
    store = open_store()
    deleted = store.prune_journal(parse_before(before, time.time()), force=force)
    click.echo(f"deleted {output.plural(deleted, 'entry', 'entries')}", err=True)


def parse_before(text: str, now: float) -> float:
    """``30d`` (that long ago), ``2026-01-01`` / ``2026-01-01T12:00:00+00:00`` (UTC unless
    it says), or Unix seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return now - seconds(text)
    except InvalidDuration:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"--before {text!r} is not a duration (30d), an ISO date or time, or Unix seconds"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
