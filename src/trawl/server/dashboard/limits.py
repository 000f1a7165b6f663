"""Rate limits with their state, and remote pipelines with theirs (drain, disconnect)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.response import Redirect

from trawl.server.dashboard.figures import PIPELINES_SHOWN
from trawl.server.dashboard.handlers import action, done, show, view
from trawl.server.live import Live
from trawl.server.pipelines.notify import tell_pipeline
from trawl.server.stores import Stores
from trawl.store.pipelines import STALE_AFTER


@view("/ui/limits")
async def limits(request: Request[Any, Any, Any], stores: Stores) -> Response[str]:
    return show(request, "limits.html", limits=await stores.run(lambda s: s.limits()))


@view("/ui/pipelines")
async def pipelines(request: Request[Any, Any, Any], stores: Stores) -> Response[str]:
    """Remote pipelines: routing, slots in use, session, last check-in, client, disk, pin."""
    rows = await stores.run(lambda s: s.pipelines.list(limit=PIPELINES_SHOWN))
    return show(request, "pipelines.html", pipelines=rows, stale=STALE_AFTER)


@action("/ui/pipelines/{pipeline_id:str}/drain")
async def drain(pipeline_id: str, stores: Stores, live: Live) -> Redirect:
    await _drain(pipeline_id, True, stores, live)
    return done("/ui/pipelines", f"{pipeline_id} drains: it claims nothing more.")


@action("/ui/pipelines/{pipeline_id:str}/undrain")
async def undrain(pipeline_id: str, stores: Stores, live: Live) -> Redirect:
    await _drain(pipeline_id, False, stores, live)
    return done("/ui/pipelines", f"{pipeline_id} claims again.")


@action("/ui/pipelines/{pipeline_id:str}/disconnect")
async def disconnect(pipeline_id: str, stores: Stores, live: Live) -> Redirect:
    await stores.run(lambda s: s.pipelines.require(pipeline_id))
    told = await tell_pipeline(live, pipeline_id, "disconnect", "an operator disconnected it")
    said = "disconnected (it may reconnect)" if told else "was not connected"
    return done("/ui/pipelines", f"{pipeline_id} {said}.")


async def _drain(pipeline_id: str, on: bool, stores: Stores, live: Live) -> None:
    await stores.run(lambda s: s.pipelines.update(pipeline_id, draining=on))
    await tell_pipeline(live, pipeline_id, "refresh", "drain" if on else "undrain")


ROUTES = [limits, pipelines, drain, undrain, disconnect]
