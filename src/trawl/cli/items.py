"""``trawl add`` and ``trawl show``: putting items in and looking at one."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import click
from rich.table import Table

from trawl.cli import filebar, itemfile, output
from trawl.cli.common import json_option, open_store
from trawl.model.errors import InvalidInput, ItemNotFound
from trawl.model.ids import check_id
from trawl.model.itemjson import Defaults
from trawl.model.records import ItemView, JobView, NewItem
from trawl.store import codec
from trawl.store.staging import ItemStages
from trawl.store.store import Store

BATCH = 5000
# Two connections writing at once: a batch's cost is the database server's (its inserts,
# index entries and foreign-key checks), so a second writer nearly doubles what a server
# with a core to spare does, while asking little of a shared one.
WRITERS_POSTGRES = 2
# A file this small is a few thousand items, about a batch: a second writer costs a
# connection and a thread and saved nothing measurable (5,000 items: 0.70 and 1.04 s with
# one, 0.68 and 0.81 s with two), and one keeps the journal in the file's order. Stdin's
# size is not known: it gets the default.
ONE_WRITER_BYTES = 256 << 10


@dataclass(frozen=True, slots=True)
class Added:
    created: int
    existing: int
    bad_lines: int = 0


@click.command("add")
@click.argument("item", metavar="[ID]", required=False)
@click.option(
    "--tag",
    "-t",
    "tags",
    multiple=True,
    metavar="NAME[=VALUE]",
    help="Tag the item (repeatable). With --file, added to every item.",
)
@click.option("--data", "-d", metavar="JSON", help="The item's data: a JSON object.")
@click.option(
    "--niceness",
    type=int,
    help="Run this item's jobs before (lower) or after (higher) others; default: each task's.",
)
@click.option(
    "--file",
    "-f",
    "path",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="Add every item of a JSON Lines file ('-' reads stdin).",
)
@click.option("--skip-bad", is_flag=True, help="With --file: add the good lines, skip bad ones.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=BATCH,
    show_default=True,
    help="With --file: items written per transaction.",
)
@click.option(
    "--writers",
    type=click.IntRange(min=1),
    help=f"With --file on PostgreSQL: connections writing batches at once [default:"
    f" {WRITERS_POSTGRES}; 1 for a file of at most {ONE_WRITER_BYTES >> 10} KiB]. Items"
    " spread over them by id, so the journal lists each connection's items in file order,"
    " interleaved. SQLite has one writer.",
)
@click.option(
    "--progress/--no-progress",
    "show_progress",
    default=True,
    show_default=True,
    help="With --file: a progress bar on stderr while checking and adding, when stdout and"
    " stderr are a terminal (never with --json).",
)
@json_option
def add(
    item: str | None,
    tags: tuple[str, ...],
    data: str | None,
    niceness: int | None,
    path: str | None,
    skip_bad: bool,
    batch_size: int,
    writers: int | None,
    show_progress: bool,
    as_json: bool,
) -> None:
    """Add one item, or every item of a file; ids that already exist are left as they are.

    A file has one JSON object a line: {"id": "...", "tags": ..., "data": {...}}
    and optionally "niceness". Tags are a list of names, a list of [name, value]
    pairs, or an object {name: value}. The whole file is checked before anything
    is written: every bad line is reported with its number and, unless
    --skip-bad, nothing is added. Blank lines are ignored; when an id appears
    twice, the first line wins. Good files are written in batches (one
    transaction each); adding a file again is safe, as existing ids are skipped.

    With --json, prints {"created": N, "existing": N, "bad_lines": N}.
    """
    defaults = Defaults(tags=tuple(itemfile.parse_tag_option(t) for t in tags), niceness=niceness)
    if path is not None:
        if item is not None or data is not None:
            raise click.UsageError("give either an ID (with --data) or --file, not both")
        added = _add_file(
            path,
            defaults,
            skip_bad=skip_bad,
            batch_size=batch_size,
            writers=writers,
            progress=show_progress and not as_json,
        )
    elif item is None:
        raise click.UsageError("give an ID to add, or --file FILE")
    else:
        added = _add_one(item, data, defaults)
        if added.existing and not as_json:
            click.echo(f"{item} already exists (left unchanged)")
            return
    _report(added, as_json)


def _add_one(item: str, data: str | None, defaults: Defaults) -> Added:
    new = NewItem(
        id=check_id(item),
        tags=defaults.tags,
        data=codec.parse_object(data, "--data") if data is not None else {},
        niceness=defaults.niceness,
    )
    created = open_store().add_items([new])
    return Added(created=len(created), existing=1 - len(created))


def _add_file(
    path: str,
    defaults: Defaults,
    *,
    skip_bad: bool,
    batch_size: int,
    writers: int | None,
    progress: bool,
) -> Added:
    store = open_store()
    with (
        itemfile.line_source(path) as source,
        filebar.file_bar(progress) as bar,
        store.stage_items(writers=writers or _writers(store, source.size)) as stage,
    ):
        check = _Check(bar, batch_size)
        lines = bar.track(source.lines, "checking", source.size)
        stage.add(check.good(itemfile.scan(lines, defaults)))
        if check.bad and not skip_bad:
            name = "stdin" if path == "-" else path
            raise InvalidInput(
                f"{name} has {output.plural(check.bad, 'bad line')}; nothing was added "
                "(fix them, or pass --skip-bad to add the good lines)"
            )
        created = _write(stage, batch_size, check.marks, bar)
    return Added(created=created, existing=stage.count - created, bad_lines=check.bad)


def _writers(store: Store, size: int | None) -> int:
    """How many connections write a file when --writers is not given."""
    if store.is_sqlite or (size is not None and size <= ONE_WRITER_BYTES):
        return 1
    return WRITERS_POSTGRES


class _Check:
    """Reports bad lines as they are found and passes the good ones on, noting where in the
    file each batch of good lines ends (for the progress of writing them)."""

    def __init__(self, bar: filebar.FileBar, batch_size: int) -> None:
        self.bar = bar
        self.batch_size = batch_size
        self.bad = 0
        self.marks: list[filebar.Mark] = []

    def good(self, entries: Iterable[NewItem | itemfile.BadLine]) -> Iterator[NewItem]:
        count = 0
        for entry in entries:
            if isinstance(entry, itemfile.BadLine):
                click.echo(f"line {entry.number}: {entry.reason}", err=True)
                self.bad += 1
                continue
            yield entry
            count += 1
            if count % self.batch_size == 0:
                self.marks.append(self.bar.mark())
        self.marks.append(self.bar.mark())  # the end of the file


def _write(
    stage: ItemStages, batch_size: int, marks: list[filebar.Mark], bar: filebar.FileBar
) -> int:
    step = bar.stepper("adding", marks[-1].bytes)
    created = covered = 0
    for written in stage.write(batch_size):
        created += written.made
        covered += written.items
        # marks[k] is where the (k+1)-th batch of good lines ended; with several writers
        # the lines written are not a prefix of the file, but as many lines as one.
        if covered // batch_size:
            step(marks[min(covered // batch_size, len(marks)) - 1])
    step(marks[-1])
    return created


def _report(added: Added, as_json: bool) -> None:
    if as_json:
        output.print_json(
            {"created": added.created, "existing": added.existing, "bad_lines": added.bad_lines}
        )
        return
    message = f"created {output.plural(added.created, 'item')}"
    if added.existing:
        message += f"; {output.plural(added.existing, 'id')} already existed (left unchanged)"
    if added.bad_lines:
        message += f"; skipped {output.plural(added.bad_lines, 'bad line')}"
    click.echo(message)


@click.command("show")
@click.argument("item", metavar="ID")
@json_option
def show(item: str, as_json: bool) -> None:
    """Show an item (found through any of its aliases) with its jobs and results.

    With --json, prints one object:

    \b
    {"id": "sku:1", "data": {...}, "tags": {"name": "value or null"},
     "aliases": ["sku:1"], "created_by": null,
     "created_at": "2024-05-01T12:00:00.000Z", "created_at_epoch": 1714564800.0,
     "updated_at": "...", "updated_at_epoch": ...,
     "jobs": [{"task": "price", "status": "done", "due_at": null,
               "due_at_epoch": null, "attempt": 1, "owner": null, "niceness": 0,
               "result": {...}, "result_version": "2", "result_at": "...",
               "result_at_epoch": ..., "expires_at": null, "expires_at_epoch": null,
               "ttl": null, "succeeded": true, "ever_run": true,
               "selected": true, "fail_count": 0}]}

    A job's due_at is when it is next claimable (a lease end while running;
    null: nothing scheduled); ttl is the item's own TTL override in seconds.
    """
    view = open_store().get_item(check_id(item))
    if view is None:
        raise ItemNotFound(f"no item has the id or alias {item!r}")
    if as_json:
        output.print_json(item_json(view))
    else:
        _print_item(view)


def item_json(view: ItemView) -> dict[str, Any]:
    return {
        "id": view.id,
        "data": view.data,
        "tags": view.tags,
        "aliases": list(view.aliases),
        "created_by": view.created_by,
        **output.stamp("created_at", view.created_at),
        **output.stamp("updated_at", view.updated_at),
        "jobs": [job_json(job) for job in view.jobs],
    }


def job_json(job: JobView) -> dict[str, Any]:
    return {
        "task": job.task,
        "status": job.status.value,
        **output.stamp("due_at", job.due_at),
        "attempt": job.attempt,
        "owner": job.owner,
        "niceness": job.niceness,
        "result": job.result,
        "result_version": job.result_version,
        **output.stamp("result_at", job.result_at),
        **output.stamp("expires_at", job.expires_at),
        "ttl": job.ttl,
        "succeeded": job.succeeded,
        "ever_run": job.ever_run,
        "selected": job.selected,
        "fail_count": job.fail_count,
    }


def _print_item(view: ItemView) -> None:
    now = time.time()
    tags = ", ".join(
        name if value is None else f"{name}={value}" for name, value in view.tags.items()
    )
    click.echo(f"id        {view.id}")
    click.echo(f"aliases   {', '.join(a for a in view.aliases if a != view.id) or '-'}")
    click.echo(f"tags      {tags or '-'}")
    click.echo(f"created   {output.moment(view.created_at, now)}")
    click.echo(f"updated   {output.moment(view.updated_at, now)}")
    click.echo(f"by        {view.created_by or '-'}")
    click.echo(f"data      {output.compact_json(view.data)}")
    if not view.jobs:
        click.echo("jobs      none (no registered task is selected by this item's tags)")
        return
    click.echo("")
    output.print_table(_jobs_table(view.jobs, now))
    for job in view.jobs:
        if job.result is not None:
            click.echo(f"result of {job.task}: {output.compact_json(job.result)}")


def _jobs_table(jobs: tuple[JobView, ...], now: float) -> Table:
    grid = output.table("task", "status", "due", "attempt", "version", "result", "expires")
    for job in jobs:
        status = job.status.value if job.selected else f"{job.status.value} (untagged)"
        grid.add_row(
            job.task,
            status,
            output.relative(job.due_at, now, never="never"),
            str(job.attempt),
            job.result_version or "-",
            output.relative(job.result_at, now),
            output.relative(job.expires_at, now, never="never"),
        )
    return grid
