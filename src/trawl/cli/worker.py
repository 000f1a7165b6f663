"""``trawl worker APP``: run an app's tasks until stopped (or idle)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import click

from trawl.cli import output, progress
from trawl.cli.common import (
    allow_hook_option,
    concurrency_option,
    duration,
    grace_option,
    log_level_option,
    metrics_option,
    progress_every_option,
    progress_option,
    serve_metrics,
    settings,
)
from trawl.crawl import state as crawl_state
from trawl.crawl.state import remote_crawling
from trawl.model.errors import InvalidInput
from trawl.runtime.app import App
from trawl.runtime.clock import WorkerClock
from trawl.runtime.dryrun import DryRunJob
from trawl.runtime.dryrun import dry_run as dry_run_jobs
from trawl.runtime.loader import load_app
from trawl.runtime.remote.run import Remote
from trawl.runtime.worker import Worker, run_worker
from trawl.store.url import display

log = logging.getLogger("trawl.cli")


@click.command("worker")
@click.argument("app_spec", metavar="[APP]", required=False)
@click.option(
    "--crawl",
    "crawling",
    is_flag=True,
    help="Run the crawler's fetch task (trawl.crawl.app:app) instead of an APP: a crawl "
    "worker for every active crawl.",
)
@click.option(
    "--warc-dir",
    metavar="DIR",
    type=click.Path(file_okay=False, writable=True),
    help="With --crawl --server: where this pipeline writes its WARC files, named after the "
    "crawl's WARC and the pipeline [default: the current directory].",
)
@concurrency_option(
    "Tasks run at the same time (async slots; plain functions use threads).", default=16
)
@click.option(
    "--connections",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Database connections claiming and committing side by side, each with a batch "
    "of at most its share of the slots in flight (pays on PostgreSQL with 200+ slots).",
)
@click.option(
    "--max-clock-skew",
    metavar="DURATION",
    callback=duration,
    default="2s",
    show_default=True,
    help="Refuse to run if this machine's clock is further than this from the database's.",
)
@click.option(
    "--use-database-clock",
    is_flag=True,
    help="Past --max-clock-skew, run on the database's time instead of refusing.",
)
@click.option("--tasks", metavar="A,B", help="Run only these tasks (comma-separated).")
@allow_hook_option
@click.option(
    "--exit-when-idle",
    is_flag=True,
    help="Exit once no job is due and no retry or deferral this worker committed is still to come.",
)
@grace_option
@progress_option("a live line")
@progress_every_option
@log_level_option("the worker logs")
@metrics_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Run tasks on due jobs without writing anything; print what each would commit.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="With --dry-run: how many due jobs to run.",
)
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: one JSON object a job.")
@click.option(
    "--server",
    metavar="URL",
    help="Run as a remote pipeline: claim and commit through the tracker at URL "
    "(ws://host:port, as `trawl serve` listens) instead of the database.",
)
@click.option("--pipeline", "pipeline_id", metavar="ID", help="With --server: the pipeline's id.")
@click.option(
    "--token",
    metavar="TOKEN",
    envvar="TRAWL_PIPELINE_TOKEN",
    help="With --server: the pipeline's token [default: $TRAWL_PIPELINE_TOKEN, which keeps "
    "it out of the process list].",
)
@click.pass_context
def worker(
    ctx: click.Context,
    app_spec: str | None,
    crawling: bool,
    warc_dir: str | None,
    concurrency: int,
    connections: int,
    max_clock_skew: float,
    use_database_clock: bool,
    tasks: str | None,
    exit_when_idle: bool,
    grace: float,
    show_progress: bool,
    progress_every: float,
    log_level: str,
    metrics: tuple[str, int] | None,
    dry_run: bool,
    limit: int,
    as_json: bool,
    server: str | None,
    pipeline_id: str | None,
    token: str | None,
) -> None:
    """Run the tasks of APP, given as module:attr or path/to/file.py:attr.

    The database is --db (or TRAWL_DB) when given, else the app's own db.
    SIGINT or SIGTERM stops claiming, lets running tasks finish within --grace
    and releases the rest so they are due again at once; a second signal exits
    immediately (those leases then expire on their own). Logs go to stderr.

    --dry-run runs up to --limit due jobs against the real database, read-only,
    and prints per job the effects it would commit (items created, data and
    metadata diffs, aliases, expiries). With --json, one object a line:

    \b
    {"item": "sku:1", "task": "price", "outcome": "done", "result": {...},
     "error": null, "effects": [{"effect": "UpdateData", "id": "sku:1",
     "diff": {"added": {...}, "changed": {"k": [old, new]}, "removed": []}}]}

    --crawl runs crawls instead of an APP (with --server, fetching for a
    tracker: politeness permits come from it, WARC files go to --warc-dir here).

    With --server, --pipeline and --token the worker is a remote pipeline
    (docs/pipelines.md): it needs no database credentials, only the app's code;
    it runs the app's tasks that the tracker routes to the pipeline, and keeps
    running what it holds through a dropped connection, reconnecting with backoff.
    """
    progress.configure_logging(log_level)
    if token and ctx.get_parameter_source("token") is click.core.ParameterSource.COMMANDLINE:
        # Kept for scripts that pass it, but argv is readable by every user of the machine
        # through ps and /proc (issue 56.15).
        click.echo(
            "warning: --token puts the secret in the process list, where any user of this "
            "machine can read it; set TRAWL_PIPELINE_TOKEN instead",
            err=True,
        )
    remote = _remote(server, pipeline_id, token, connections=connections, dry_run=dry_run)
    app = load_app(_app_spec(app_spec, crawling))
    if crawling and remote is not None:
        remote_crawling(remote, warc_dir or ".")
    elif warc_dir is not None:
        raise click.UsageError("--warc-dir goes with --crawl --server")
    names = _task_names(tasks, app, remote=remote is not None)
    if dry_run:
        reports = asyncio.run(dry_run_jobs(app, settings().db or app.db, names, limit))
        _print_dry_run(reports, as_json)
        return
    app.plugins.extend(serve_metrics(metrics))
    backend = remote.backend(concurrency) if remote is not None else None
    with progress.reporter(show_progress, progress_every, progress.WORKER) as on_progress:
        runner = Worker(
            app,
            owner=backend.owner if backend is not None else None,
            url=settings().db or app.db,
            concurrency=concurrency,
            connections=connections,
            tasks=names,
            exit_when_idle=exit_when_idle,
            grace=grace,
            on_progress=on_progress,
            clock=WorkerClock(max_skew=max_clock_skew, use_database=use_database_clock),
            backend=backend,
            # The crawl's HTTP session and WARC files, closed on the worker's own loop.
            on_stop=crawl_state.shutdown if crawling else None,
        )
        where = remote.describe() if remote is not None else display(runner.url)
        log.info(
            "worker %s: tasks %s on %s, concurrency %d, %d connection(s)",
            runner.owner,
            ", ".join(runner.defs),
            where,
            concurrency,
            runner.connections,
        )
        code = run_worker(runner) if remote is None else remote.run(runner)
    ctx.exit(code)


def _print_dry_run(reports: list[DryRunJob], as_json: bool) -> None:
    for report in reports:
        if as_json:
            output.print_json_line(dataclasses.asdict(report))
            continue
        status = report.outcome if report.error is None else f"{report.outcome}: {report.error}"
        click.echo(f"{report.task} on {report.item}: {status}")
        if report.result is not None:
            click.echo(f"  result: {output.compact_json(report.result)}")
        for effect in report.effects:
            click.echo(f"  {output.compact_json(effect)}")
    if not as_json:
        click.echo(f"dry run: {output.plural(len(reports), 'job')}, nothing written")


def _app_spec(app_spec: str | None, crawling: bool) -> str:
    if crawling and app_spec is not None:
        raise click.UsageError("give an APP or --crawl, not both")
    if crawling:
        return "trawl.crawl.app:app"
    if app_spec is None:
        raise click.UsageError(
            "give the APP to run (module:attr or path/to/file.py:attr), or --crawl"
        )
    return app_spec


def _remote(
    server: str | None,
    pipeline_id: str | None,
    token: str | None,
    *,
    connections: int,
    dry_run: bool,
) -> Remote | None:
    if server is None:
        if pipeline_id is not None:
            raise click.UsageError("--pipeline and --token go with --server")
        return None
    if not pipeline_id or not token:
        raise click.UsageError("--server needs --pipeline ID and --token TOKEN")
    if not server.startswith(("ws://", "wss://")):
        raise click.BadParameter(f"{server!r}: expected ws://host:port", param_hint="--server")
    if settings().db is not None:
        raise click.UsageError("--server and --db exclude each other: a pipeline has no database")
    if dry_run or connections != 1:
        raise click.UsageError("--dry-run and --connections need the database, not --server")
    return Remote(server, pipeline_id, token)


def _task_names(tasks: str | None, app: App, *, remote: bool = False) -> list[str] | None:
    if not app.declared():
        raise InvalidInput("the app declares no tasks: decorate functions with @app.task")
    if tasks is None:
        # built-in tasks (schedules) need the database: a pipeline runs the app's own
        return [d.name for d in app.declared() if d.is_local] if remote else None
    names = [name.strip() for name in tasks.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("name at least one task", param_hint="--tasks")
    for name in names:
        app.get(name)  # raises UnknownTask naming the app's tasks
    return names
