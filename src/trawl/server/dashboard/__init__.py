"""The web dashboard, served by ``trawl serve`` at ``/`` (docs/dashboard.md).

Server-rendered pages (Jinja2) with htmx for live pieces over Server-Sent Events from one
shared feed per server process. Sign-in takes an API token; a signed session cookie
follows. Every read and action goes through the same store verbs and crawl operations as
the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litestar import Router
from litestar.static_files import create_static_files_router

from trawl.runtime.dbmetrics import DbMetrics
from trawl.server.auth import PUBLIC, Tokens
from trawl.server.dashboard import (
    crawls,
    errors,
    failures,
    items,
    journal,
    limits,
    overview,
    signin,
    stream,
)
from trawl.server.dashboard.feed import REFRESH, Feed
from trawl.server.dashboard.guard import guard
from trawl.server.dashboard.handlers import routes_of
from trawl.server.dashboard.pieces import render
from trawl.server.dashboard.session import CACHE_SECONDS, Sessions
from trawl.server.stores import Stores

STATIC = Path(__file__).parent / "static"


class Dashboard:
    """The dashboard's routes, its sessions and its feed, for one server process."""

    def __init__(
        self,
        stores: Stores,
        tokens: Tokens,
        gauges: DbMetrics,
        *,
        refresh: float = REFRESH,
        session_cache: float = CACHE_SECONDS,
    ) -> None:
        self.sessions = Sessions(stores, tokens, cache_seconds=session_cache)
        self.feed = Feed(stores, gauges, render, refresh=refresh)

    def routers(self) -> list[Any]:
        pages = Router(
            path="/",
            route_handlers=routes_of(
                overview, signin, crawls, items, failures, journal, limits, stream
            ),
            guards=[guard],
            exception_handlers={Exception: errors.handle},
            include_in_schema=False,
        )
        static = create_static_files_router(
            path="/ui/static",
            directories=[STATIC],
            opt={"scope": PUBLIC},
            include_in_schema=False,
            cache_control=None,
        )
        return [pages, static]
