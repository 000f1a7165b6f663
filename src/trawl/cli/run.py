"""``trawl run APP``: the orchestrator for the collection on this machine."""

from __future__ import annotations

from pathlib import Path

import click

from trawl.cli import live, progress
from trawl.cli.common import (
    concurrency_option,
    grace_option,
    log_level_option,
    metrics_option,
    progress_every_option,
    progress_option,
    serve_metrics,
    settings,
)
from trawl.model.errors import InvalidInput
from trawl.runtime.loader import load_app
from trawl.runtime.orchestrator import Orchestrator
from trawl.runtime.plugins import for_app


@click.command("run")
@click.argument("app_spec", metavar="APP")
@click.option(
    "--exit-when-idle",
    is_flag=True,
    help="Exit once nothing is due, no retry is still to come and every actor has exited.",
)
@click.option(
    "--max-actors",
    type=click.IntRange(min=1),
    metavar="N",
    help="Most actor processes at once, all tasks together [default: the CPU count, at least 2].",
)
@concurrency_option(
    "Jobs each actor runs at a time, unless its task's trawl.Actor sets its own.", default=16
)
@grace_option
@progress_option("a live table")
@progress_every_option
@click.option("--log-json", is_flag=True, help="Log JSON lines on stderr (for services).")
@log_level_option("the orchestrator and its actors log")
@metrics_option
@click.pass_context
def run(
    ctx: click.Context,
    app_spec: str,
    exit_when_idle: bool,
    max_actors: int | None,
    concurrency: int,
    grace: float,
    show_progress: bool,
    progress_every: float,
    log_json: bool,
    metrics: tuple[str, int] | None,
    log_level: str,
) -> None:
    """Run the tasks of APP (module:attr or path/to/file.py:attr) in actor processes.

    This is the orchestrator for the collection (the database: --db, TRAWL_DB,
    else the app's db) on this machine; a second one on the same database and
    machine refuses to start, naming the first one's pid. Each tick it reads
    every task's due jobs, starts actors (one process per task, or per launch
    key, see trawl.Actor) up to each task's max_actors and --max-actors in
    all, restarts what dies while work is due, kills an actor whose task
    blocks it past the task's timeout, and warns once per task about due jobs
    that no task of APP serves. Actors exit when their queue stays empty.

    SIGINT or SIGTERM stops starting actors and asks each to finish its
    running tasks within --grace; what remains is killed and its jobs are
    handed back, due again at once. A second signal kills the actors at once.
    """
    progress.configure_logging(log_level, as_json=log_json)
    app = load_app(app_spec)
    if not app.declared():
        raise InvalidInput("the app declares no tasks: decorate functions with @app.task")
    with live.progress(show_progress, progress_every, log_json) as display:
        # the actors write their samples where the orchestrator's port serves them added up
        plugins = for_app(app, *serve_metrics(metrics, actors=True))
        if display is not None:
            plugins.register(display, "trawl.progress")
        orchestrator = Orchestrator(
            app,
            app_spec=_absolute(app_spec),
            url=settings().db or app.db,
            max_actors=max_actors,
            concurrency=concurrency,
            exit_when_idle=exit_when_idle,
            grace=grace,
            plugins=plugins,
            log_level=log_level,
        )
        code = orchestrator.run()
    ctx.exit(code)


def _absolute(spec: str) -> str:
    """APP with its file made absolute, so actors find it from any working directory."""
    target, colon, attr = spec.rpartition(":")
    if target.endswith(".py"):
        return f"{Path(target).resolve()}{colon}{attr}"
    if not target and spec.endswith(".py"):
        return str(Path(spec).resolve())
    return spec
