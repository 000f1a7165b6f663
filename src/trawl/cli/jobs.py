"""``trawl status`` and ``trawl expire``: the state of jobs per task, and redoing results."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from trawl.cli import output
from trawl.cli.common import json_option, open_store, task_option
from trawl.model.ids import check_id, check_tag
from trawl.model.records import TaskCounts
from trawl.runtime import recurring
from trawl.runtime.loader import load_app
from trawl.store.handoffs import ExecutorTask, FeederRow


@click.command("status")
@click.option(
    "--app",
    "app_spec",
    metavar="APP",
    help="Also mark as orphaned the tasks with due jobs that APP (module:attr or "
    "path/to/file.py:attr) does not declare.",
)
@json_option
def status(app_spec: str | None, as_json: bool) -> None:
    """Show, per task, how many jobs are queued, running, done, failed and skipped.

    DUE NOW counts jobs that a worker may claim at once (new, retrying, expired
    or with a lapsed lease); UNHANDLED counts failures nobody has retried or
    handled yet. A task marked "(not registered)" has jobs but no worker has
    declared it; one marked "(paused: why)" is not claimed by any worker until
    `trawl task resume`. One marked "(orphaned)" has jobs due that nothing
    serves: its task is not registered, or (with --app) APP does not declare
    it; `trawl run` warns about these too.

    Tasks an external executor runs (executor="celery") get a second table:
    per queue, the jobs published and waiting in the broker (IN BROKER), those
    a Celery worker runs (RUNNING), and the queue's length in the broker and
    cap as its feeder last saw them.

    With --json, prints one object:

    \b
    {"tasks": [{"task": "price", "version": "2", "registered": true,
                "counts": {"queued": 0, "running": 0, "done": 3, "failed": 1,
                           "skipped": 0},
                "due_now": 0, "unhandled_failures": 1, "paused": null,
                "orphaned": false}],
     "executors": [{"executor": "celery", "queue": "trawl.load", "task": "load",
                    "in_broker": 48, "running": 8, "claimed": 0,
                    "broker_length": 47, "seen_at": "...", "seen_at_epoch": 1.7e9,
                    "cap": 50, "feeder": "feed:host:123:abc"}]}
    """
    declared = set(load_app(app_spec).tasks) if app_spec is not None else None
    store = open_store()
    rows = [row for row in store.status() if not _idle_builtin(row)]
    orphaned = {row.task for row in rows if _orphaned(row, declared)}
    executors = executor_rows(*store.executors())
    if as_json:
        tasks = [counts_json(row, row.task in orphaned) for row in rows]
        output.print_json({"tasks": tasks, "executors": executors})
    elif not rows:
        click.echo("no tasks yet: run `trawl worker APP` to register the app's tasks")
    else:
        output.print_table(_status_table(rows, orphaned))
        if executors:
            output.print_table(_executors_table(executors))


def executor_rows(tasks: list[ExecutorTask], feeders: list[FeederRow]) -> list[dict[str, Any]]:
    """Per task an external executor runs: where its jobs in flight are."""
    by_queue = {f.queue: f for f in feeders}
    rows = []
    for t in tasks:
        feeder = by_queue.get(t.queue or "")
        rows.append(
            {
                "executor": t.executor,
                "queue": t.queue,
                "task": t.task,
                "in_broker": t.queued + t.claimed,
                "running": t.started,
                "claimed": t.claimed,
                "broker_length": feeder.broker_length if feeder else None,
                **output.stamp("seen_at", feeder.seen_at if feeder else None),
                "cap": feeder.cap if feeder else None,
                "feeder": feeder.owner if feeder else None,
            }
        )
    return rows


def _executors_table(rows: list[dict[str, Any]]) -> Table:
    grid = output.table("executor", "queue", "task", "in broker", "running", "broker says", "cap")
    for column in grid.columns[3:]:
        column.justify = "right"
    for r in rows:
        seen = "-" if r["broker_length"] is None else f"{r['broker_length']:,}"
        cap = "-" if r["cap"] is None else f"{r['cap']:,}"
        grid.add_row(
            r["executor"], r["queue"] or "-", r["task"], f"{r['in_broker']:,}",
            f"{r['running']:,}", seen, cap,
        )  # fmt: skip
    return grid


def _idle_builtin(row: TaskCounts) -> bool:
    """Every app has trawl.schedule; it is shown once there are schedules."""
    counts = (row.queued, row.running, row.done, row.failed, row.skipped)
    return row.task == recurring.TASK and not any(counts)


def _orphaned(row: TaskCounts, declared: set[str] | None) -> bool:
    """Jobs are due that nothing serves (as far as the database, and APP, can tell)."""
    unserved = not row.registered or (declared is not None and row.task not in declared)
    return unserved and row.due_now > 0


def counts_json(row: TaskCounts, orphaned: bool = False) -> dict[str, Any]:
    return {
        "task": row.task,
        "version": row.version,
        "registered": row.registered,
        "counts": {
            "queued": row.queued,
            "running": row.running,
            "done": row.done,
            "failed": row.failed,
            "skipped": row.skipped,
        },
        "due_now": row.due_now,
        "unhandled_failures": row.unhandled_failures,
        "paused": row.paused,
        "orphaned": orphaned,
    }


def _status_table(rows: list[TaskCounts], orphaned: set[str]) -> Table:
    columns = (
        "task", "version", "queued", "running", "done", "failed", "skipped", "due now",
        "unhandled",
    )  # fmt: skip
    grid = output.table(*columns)
    for column in grid.columns[2:]:
        column.justify = "right"
    for row in rows:
        name = row.task if row.registered else f"{row.task} (not registered)"
        if row.paused:
            name = f"{name} (paused: {row.paused})"
        if row.task in orphaned:
            name = f"{name} (orphaned)"
        counts = (row.queued, row.running, row.done, row.failed, row.skipped, row.due_now)
        grid.add_row(
            name,
            row.version or "-",
            *(f"{n:,}" for n in counts),
            f"{row.unhandled_failures:,}",
        )
    return grid


@click.command("expire")
@task_option(required=True, help="The task whose results to redo.")
@click.option("--tag", metavar="TAG", help="Only items carrying this tag.")
@click.option("--id", "item", metavar="ID", help="Only this item (or alias).")
def expire(task: str, tag: str | None, item: str | None) -> None:
    """Make results of a task due again now, for all items, those with a tag, or one item.

    Running jobs are left alone; everything else selected for the task is
    claimable at once.
    """
    if tag is not None and item is not None:
        raise click.UsageError("give --tag or --id, not both")
    count = open_store().expire(
        task,
        tag=check_tag(tag) if tag is not None else None,
        alias=check_id(item) if item is not None else None,
    )
    click.echo(f"{output.plural(count, 'job')} of task {task} due again now")
