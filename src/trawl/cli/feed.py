"""``trawl feed celery APP``: keep the Celery queues of APP's ``executor="celery"`` tasks filled."""

from __future__ import annotations

import logging

import click

from trawl.cli import progress
from trawl.cli.common import duration, log_level_option, settings
from trawl.model.errors import InvalidInput, TrawlError
from trawl.runtime.app import App
from trawl.runtime.feeder import Feeder, FeedOptions
from trawl.runtime.loader import load_app
from trawl.store.store import Store
from trawl.store.url import display

log = logging.getLogger("trawl.cli")


@click.group("feed")
def feed() -> None:
    """Keep an external executor's queues filled with due jobs."""


@feed.command("celery")
@click.argument("app_spec", metavar="APP")
@click.option(
    "--max-queue",
    type=click.IntRange(min=1),
    required=True,
    help="The most messages each queue may hold (its cap).",
)
@click.option("--tasks", metavar="A,B", help="Feed only these tasks (comma-separated).")
@click.option(
    "--full-wait",
    metavar="DURATION",
    callback=duration,
    default="60s",
    show_default=True,
    help="How long to wait when less than 5% of the cap is free (plus up to --splay).",
)
@click.option(
    "--splay",
    metavar="DURATION",
    callback=duration,
    default="5s",
    show_default=True,
    help="Up to this much more, at random, on each full-queue wait.",
)
@click.option(
    "--idle-wait",
    metavar="DURATION",
    callback=duration,
    default="5m",
    show_default=True,
    help="How long to wait when nothing is due (PostgreSQL's NOTIFY of new work cuts it short).",
)
@click.option(
    "--queue-lease",
    metavar="DURATION",
    callback=duration,
    default="1h",
    show_default=True,
    help="How long a published job may wait in the broker before it counts as lost: "
    "above the queue's length divided by the workers' rate.",
)
@log_level_option("the feeder logs")
def celery(
    app_spec: str,
    max_queue: int,
    tasks: str | None,
    full_wait: float,
    splay: float,
    idle_wait: float,
    queue_lease: float,
    log_level: str,
) -> None:
    """Keep the Celery queue of each of APP's executor="celery" tasks filled.

    APP (module:attr or path/to/file.py:attr) must call trawl.celery.bind(app,
    celery_app). In a loop, per queue: free = --max-queue minus the queue's
    length in the broker; with less than 5% free, wait --full-wait; else claim
    that many due jobs (shared by the task's visit policy, within its rate
    limits), publish them and record them. Jobs claimed and never recorded are
    published again; leases lost with a Celery worker are settled as crashed
    attempts and retried. One feeder per queue: a second one is refused.
    SIGINT or SIGTERM stops it.
    """
    progress.configure_logging(log_level)
    try:
        from trawl.celery.broker import CeleryBroker
    except ImportError as error:
        raise TrawlError(
            f"Celery is not installed ({error}): pip install 'trawl[celery]'"
        ) from None
    app = load_app(app_spec)
    broker = CeleryBroker(_celery_app(app, app_spec))
    options = FeedOptions(
        cap=max_queue,
        full_wait=full_wait,
        splay=splay,
        idle_wait=idle_wait,
        queue_lease=queue_lease,
    )
    names = None if tasks is None else [n.strip() for n in tasks.split(",") if n.strip()]
    feeder = Feeder(app, broker, options, url=settings().db or app.db, tasks=names)
    log.info(
        "feeder %s: queues %s (cap %d) on %s",
        feeder.owner,
        ", ".join(feeder.queues),
        max_queue,
        display(feeder.url),
    )
    with Store(feeder.url) as store:
        try:
            feeder.run(store)
        finally:
            broker.close()


def _celery_app(app: App, spec: str) -> object:
    bound = app.executors.get("celery")
    if bound is None:
        raise InvalidInput(
            f"{spec} binds no Celery app: call trawl.celery.bind(app, celery_app) in it"
        )
    return bound
