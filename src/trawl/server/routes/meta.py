"""The routes about the server itself: health (no token) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get
from litestar.response import Redirect
from prometheus_client import generate_latest

from trawl.runtime.dbmetrics import DbMetrics
from trawl.server.stores import Stores
from trawl.store.store import Store

EXPOSITION = "text/plain; version=0.0.4"  # the text format; the charset is added


class Health(msgspec.Struct):
    status: str
    database: str


@get("/health", opt={"scope": "public"}, tags=["server"])
async def health(stores: Stores) -> Response[Health]:
    """Whether the server is up and reaches its database (503 if not). Needs no token."""
    try:
        await stores.run(lambda store: store.schema_revision())
    except Exception as error:
        return Response(Health("unavailable", str(error)[:200]), status_code=503)
    return Response(Health("ok", "ok"))


@get("/metrics", opt={"scope": "read"}, tags=["server"], media_type=EXPOSITION)
async def metrics(stores: Stores, gauges: DbMetrics) -> bytes:
    """Prometheus text format: the database's counts (see docs/metrics.md), refreshed at
    most every few seconds however often it is scraped."""

    def read(store: Store) -> bytes:
        gauges.refresh(store)
        return generate_latest(gauges.registry)

    return await stores.run(read)


@get("/openapi.json", opt={"scope": "read"}, include_in_schema=False)
async def openapi(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The OpenAPI document (also at /schema/openapi.json)."""
    return request.app.openapi_schema.to_schema()


@get("/docs", opt={"scope": "read"}, include_in_schema=False)
async def docs() -> Redirect:
    """The interactive page (Swagger UI) is at /schema/swagger."""
    return Redirect("/schema/swagger")
