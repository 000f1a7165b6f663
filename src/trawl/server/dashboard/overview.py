"""The overview at ``/``: every task's jobs and rate, workers holding leases, crawl pages
and hosts, all from the cached gauges."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response

from trawl.runtime.dbmetrics import DbMetrics
from trawl.server.dashboard import figures, pieces
from trawl.server.dashboard.feed import Feed
from trawl.server.dashboard.handlers import show, view
from trawl.server.stores import Stores


@view("/")
async def overview(
    request: Request[Any, Any, Any], stores: Stores, gauges: DbMetrics, feed: Feed
) -> Response[str]:
    seen = await stores.run(lambda s: figures.overview(s, gauges, wait=False))
    return show(request, "overview.html", view=seen, pieces=pieces.overview(seen, feed.rates))


ROUTES = [overview]
