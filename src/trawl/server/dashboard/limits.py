"""Rate limits with their state, and the place kept for remote pipelines."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response

from trawl.server.dashboard.handlers import show, view
from trawl.server.stores import Stores


@view("/ui/limits")
async def limits(request: Request[Any, Any, Any], stores: Stores) -> Response[str]:
    return show(request, "limits.html", limits=await stores.run(lambda s: s.limits()))


@view("/ui/pipelines")
async def pipelines(request: Request[Any, Any, Any]) -> Response[str]:
    """Remote pipelines (issue 16) are not built yet: the page says so, and shows nothing
    it cannot know."""
    return show(request, "pipelines.html")


ROUTES = [limits, pipelines]
