"""``trawl failures``: list failed attempts, retry their jobs, or mark them handled."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from rich.table import Table

from trawl.cli import output
from trawl.cli.common import json_option, open_store, task_option
from trawl.model.ids import check_id
from trawl.model.records import FailureRecord
from trawl.store.store import Store

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_LIMIT = 100


def filter_options(fn: F) -> F:
    """``--task`` and ``--id``, shared by the listing and the actions."""
    fn = click.option("--id", "item", metavar="ID", help="Only failures of this item (or alias).")(
        fn
    )
    return task_option(help="Only failures of this task.")(fn)


@click.group("failures", invoke_without_command=True)
@filter_options
@click.option("--all", "include_handled", is_flag=True, help="Include handled failures too.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Show at most this many, newest first.",
)
@click.option("--traceback", "tracebacks", is_flag=True, help="Print each full traceback.")
@json_option
@click.pass_context
def failures(
    ctx: click.Context,
    task: str | None,
    item: str | None,
    include_handled: bool,
    limit: int,
    tracebacks: bool,
    as_json: bool,
) -> None:
    """List failed attempts, newest first (unhandled ones unless --all).

    A failure stays unhandled until its job is retried (`trawl failures retry`)
    or it is marked handled (`trawl failures handle`).

    With --json, prints one object:

    \b
    {"failures": [{"id": 7, "job_id": 3, "item_id": "sku:1", "task": "price",
                   "attempt": 2, "error_type": "ValueError", "message": "...",
                   "traceback": "Traceback ...",
                   "occurred_at": "2024-05-01T12:00:00.000Z",
                   "occurred_at_epoch": 1714564800.0, "handled": false}]}
    """
    if ctx.invoked_subcommand is not None:
        _refuse_group_options(ctx)
        return
    store = open_store()
    rows = store.failures(
        task=_task(store, task),
        item_id=_item(store, item),
        include_handled=include_handled,
        limit=limit,
    )
    if as_json:
        output.print_json({"failures": [failure_json(row) for row in rows]})
    else:
        _print_failures(rows, tracebacks, limit)


def _refuse_group_options(ctx: click.Context) -> None:
    given = [
        name for name in ctx.params if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(
            f"put options after the subcommand, e.g. `trawl failures {ctx.invoked_subcommand} "
            "--task T`"
        )


def _task(store: Store, task: str | None) -> str | None:
    if task is not None:
        store.require_task(task)
    return task


def _item(store: Store, alias: str | None) -> str | None:
    return None if alias is None else store.items.require(check_id(alias))


def failure_json(row: FailureRecord) -> dict[str, Any]:
    return {
        "id": row.id,
        "job_id": row.job_id,
        "item_id": row.item_id,
        "task": row.task,
        "attempt": row.attempt,
        "error_type": row.error_type,
        "message": row.message,
        "traceback": row.traceback,
        **output.stamp("occurred_at", row.occurred_at),
        "handled": row.handled,
    }


def _print_failures(rows: list[FailureRecord], tracebacks: bool, limit: int) -> None:
    if not rows:
        click.echo("no failures")
        return
    if tracebacks:
        for row in rows:
            click.echo(f"--- failure {row.id}: {row.task} on {row.item_id}, attempt {row.attempt}")
            click.echo(row.traceback.rstrip() or f"{row.error_type}: {row.message}")
    else:
        output.print_table(_failures_table(rows))
    if len(rows) == limit:
        click.echo(f"(showing the newest {limit}; use --limit for more)", err=True)


def _failures_table(rows: list[FailureRecord]) -> Table:
    now = time.time()
    grid = output.table("id", "task", "item", "attempt", "when", "error", "handled")
    for row in rows:
        grid.add_row(
            str(row.id),
            row.task,
            row.item_id,
            str(row.attempt),
            output.relative(row.occurred_at, now),
            f"{row.error_type}: {output.first_line(row.message, 80)}",
            "yes" if row.handled else "no",
        )
    return grid


failure_ids = click.argument("ids", nargs=-1, type=click.IntRange(min=1), metavar="[FAILURE_ID]...")


@failures.command("retry")
@filter_options
@failure_ids
def retry(task: str | None, item: str | None, ids: tuple[int, ...]) -> None:
    """Make the failed jobs of matching failures due now, with a fresh retry budget.

    With no filter, every failed job is retried. Their failures are marked handled.
    """
    store = open_store()
    count = store.retry_failures(task=task, alias=_alias(item), ids=list(ids) or None)
    click.echo(f"{output.plural(count, 'failed job')} due again now")


@failures.command("handle")
@filter_options
@click.option("--all", "every", is_flag=True, help="Handle every unhandled failure.")
@failure_ids
def handle(task: str | None, item: str | None, every: bool, ids: tuple[int, ...]) -> None:
    """Mark matching failures handled: they leave the default listing and the counts.

    The jobs stay as they are. Say which failures (--task, --id, FAILURE_ID...)
    or --all, so nothing is handled by accident.
    """
    filtered = task is not None or item is not None or bool(ids)
    if not filtered and not every:
        raise click.UsageError("say which failures to handle: --task, --id, FAILURE_ID... or --all")
    if filtered and every:
        raise click.UsageError("--all handles every failure; leave out the filters, or --all")
    count = open_store().handle_failures(task=task, alias=_alias(item), ids=list(ids) or None)
    click.echo(f"{output.plural(count, 'failure')} marked handled")


def _alias(item: str | None) -> str | None:
    return None if item is None else check_id(item)
