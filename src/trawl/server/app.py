"""The API application: routes, the token guard, problem details and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme

from trawl.runtime import dbmetrics
from trawl.server import auth, openapi, problems
from trawl.server.dashboard import Dashboard
from trawl.server.headers import security_headers
from trawl.server.live import Live, load_sessions
from trawl.server.pipelines.session import WATCH_EVERY
from trawl.server.routes import crawls, failures, items, journal, meta, pipelines, tasks
from trawl.server.stores import Stores
from trawl.server.upkeep import Upkeep
from trawl.server.wakeups import Wakeups

MAX_BODY = 16 << 20  # bytes in one request; 10,000 items of 1 KiB fit easily
VERSION = "1"


def create_app(
    url: str,
    *,
    connections: int = 8,
    token_cache: float = auth.CACHE_SECONDS,
    metrics_cache: float = dbmetrics.CACHE_SECONDS,
    live: Live | None = None,
    pipeline_watch: float = WATCH_EVERY,
    refresh: float | None = None,
) -> Litestar:
    """The API for the database at *url*, lending requests up to *connections* database
    connections at a time. A checked token (and a dashboard session) is remembered
    *token_cache* seconds; the database's gauges are read at most every *metrics_cache*
    seconds. *live* serves WebSocket sessions at /live (by default a node of its own with
    no session types); remote pipelines' at /ws/pipeline, each re-reading its row every
    *pipeline_watch* s. The dashboard's live pages are refreshed every *refresh* seconds."""
    stores = Stores(url, connections)
    live = live or Live()
    wakeups = Wakeups(url)
    upkeep = Upkeep(stores)
    gauges = dbmetrics.DbMetrics(cache_seconds=metrics_cache)

    tokens = auth.Tokens(stores, cache_seconds=token_cache)
    live.tokens = tokens
    live.serve_pipelines(stores, watch_every=pipeline_watch)
    dashboard = Dashboard(stores, tokens, gauges, session_cache=token_cache)
    if refresh is not None:
        dashboard.feed.refresh = refresh

    def provide(value: Any) -> Provide:
        return Provide(lambda: value, use_cache=True, sync_to_thread=False)

    app = Litestar(
        route_handlers=[
            meta.health,
            meta.metrics,
            meta.openapi,
            meta.docs,
            items.Items,
            items.EditsController,
            tasks.Tasks,
            tasks.Due,
            tasks.LimitsController,
            failures.Failures,
            journal.Journal,
            journal.Consumers,
            crawls.Crawls,
            crawls.Hosts,
            pipelines.Pipelines,
            *live.routes(),
            *dashboard.routers(),
        ],
        dependencies={
            "stores": provide(stores),
            "wakeups": provide(wakeups),
            "gauges": provide(gauges),
            "live": provide(live),
            "feed": provide(dashboard.feed),
        },
        guards=[auth.guard],
        before_send=[security_headers],
        # by status too: a path no route matches (404, 405) is answered before the app's
        # exception handlers run unless they name its status
        exception_handlers={404: problems.handle, 405: problems.handle, Exception: problems.handle},
        request_max_body_size=MAX_BODY,
        openapi_config=OpenAPIConfig(
            title="trawl",
            version=VERSION,
            description="The HTTP API of a trawl database (docs/api.md).",
            path="/schema",  # under "/", its catch-all would answer unknown paths in HTML
            render_plugins=[SwaggerRenderPlugin(path="/swagger")],
            components=Components(
                security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
            ),
            security=[{"bearer": []}],
        ),
        state=State({"tokens": tokens, "sessions": dashboard.sessions}),
        on_startup=[wakeups.start, live.start, dashboard.feed.start, upkeep.start],
        on_shutdown=[upkeep.stop, dashboard.feed.stop, live.stop, wakeups.stop, stores.close],
        debug=False,
    )
    openapi.document_problems(app)
    return app


URL_VARIABLE = "TRAWL_SERVE_DB"  # how `trawl serve --workers N` tells each process the URL
CONNECTIONS_VARIABLE = "TRAWL_SERVE_CONNECTIONS"
SESSIONS_VARIABLE = "TRAWL_SERVE_SESSIONS"  # module:Class, comma-separated
AMQP_VARIABLE = "TRAWL_AMQP"
REDIS_VARIABLE = "TRAWL_REDIS"


def from_environment() -> Litestar:
    """The app for a uvicorn worker process started by `trawl serve` (a factory)."""
    import os

    sessions = [s for s in os.environ.get(SESSIONS_VARIABLE, "").split(",") if s]
    live = Live(
        load_sessions(sessions),
        amqp=os.environ.get(AMQP_VARIABLE) or None,
        redis=os.environ.get(REDIS_VARIABLE) or None,
    )
    return create_app(
        os.environ[URL_VARIABLE],
        connections=int(os.environ.get(CONNECTIONS_VARIABLE, "8")),
        live=live,
    )
