"""``trawl serve``: the HTTP API (docs/api.md) on uvicorn."""

from __future__ import annotations

import ipaddress
import os

import click

from trawl.cli.common import log_level_option, open_store
from trawl.model.errors import InvalidInput


@click.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback carries tokens in the clear unless a "
    "TLS proxy is in front.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes (PostgreSQL only: one per SQLite file).",
)
@click.option(
    "--connections",
    type=click.IntRange(1, 256),
    default=8,
    show_default=True,
    help="Database connections each process lends to requests at a time.",
)
@click.option(
    "--session",
    "sessions",
    multiple=True,
    metavar="MODULE:CLASS",
    help="A trawl.live.Session subclass to serve at /live (repeatable; docs/live.md).",
)
@click.option(
    "--amqp",
    envvar="TRAWL_AMQP",
    metavar="URL",
    help="Join the live layer's cluster over RabbitMQ (amqp://...); alone otherwise.",
)
@click.option(
    "--redis",
    envvar="TRAWL_REDIS",
    metavar="URL",
    help="Keep the live layer's shared state in Redis (redis://...); in memory otherwise.",
)
@log_level_option("the server logs")
def serve(
    host: str,
    port: int,
    workers: int,
    connections: int,
    sessions: tuple[str, ...],
    amqp: str | None,
    redis: str | None,
    log_level: str,
) -> None:
    """Serve the HTTP API and the web dashboard for the database (--db / TRAWL_DB).

    Every API route but /health needs `Authorization: Bearer TOKEN`; make tokens
    with `trawl token create`. The dashboard is at / (sign in with a token). The
    OpenAPI document is at /openapi.json and an interactive page at /docs. On
    PostgreSQL several servers may share one database (behind any load
    balancer). WebSocket sessions (--session) are served at /live with the
    same tokens.
    """
    # Imported here: every other command starts faster without the web stack.
    import uvicorn

    from trawl.server import app
    from trawl.server.live import load_sessions

    load_sessions(sessions)  # a misspelt class fails here, not in every worker process
    store = open_store()  # creates or checks the schema before the first request
    if store.is_sqlite and workers > 1:
        raise InvalidInput("a SQLite database is served by one process: use --workers 1")
    if not _loopback(host):
        click.echo(
            f"warning: listening on {host}: tokens travel in the clear unless TLS is in front",
            err=True,
        )
    os.environ[app.URL_VARIABLE] = store.url
    os.environ[app.CONNECTIONS_VARIABLE] = str(connections)
    os.environ[app.SESSIONS_VARIABLE] = ",".join(sessions)
    os.environ[app.AMQP_VARIABLE] = amqp or ""
    os.environ[app.REDIS_VARIABLE] = redis or ""
    click.echo(f"trawl API on http://{host}:{port} (docs: /docs, dashboard: /)", err=True)
    uvicorn.run(
        "trawl.server.app:from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level.lower(),
        timeout_graceful_shutdown=10,
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
