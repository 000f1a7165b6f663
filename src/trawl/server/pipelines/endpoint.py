"""The WebSocket endpoint remote pipelines connect to: ``/ws/pipeline`` on ``trawl serve``.

A pipeline shows its id and token in the handshake (``X-Trawl-Pipeline: ID`` and
``Authorization: Bearer TOKEN``, or ``?pipeline=ID&token=TOKEN`` for clients that cannot
set headers). A wrong or revoked token is answered HTTP 401 and logged; nothing else
happens. The sessions run on the server process's live node.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from trawl.live import LiveApp, Node
from trawl.model.records import PipelineRow
from trawl.server.pipelines.effects import CustomDecoder
from trawl.server.pipelines.framing import PipelineFraming
from trawl.server.pipelines.session import WATCH_EVERY, PipelineSession
from trawl.server.stores import Stores

log = logging.getLogger("trawl.pipelines")

MAX_FRAME = 16 << 20  # a claim's reply or a commit of many attempts with their effects
# A busy pipeline sends a claim per batch, renewals and Context reads, and a crawl pipeline
# two frames a page (its plan and its first-copy lookup): far more than a browser's
# session. 500 frames/s held one crawl pipeline to about 230 pages/s on loopback, whatever
# its slots; 5,000 admit a pipeline about ten times that. A runaway one is still slowed,
# and cut once it is ten seconds behind.
BURST, RATE, CUT_AFTER = 1000, 5000.0, 50_000


def endpoint(
    stores: Stores,
    customs: Mapping[str, CustomDecoder] | None = None,
    *,
    watch_every: float = WATCH_EVERY,
) -> LiveApp:
    """The endpoint's ASGI app; the server sets its ``node`` when its node starts. Each
    session re-reads its pipeline's row every *watch_every* seconds."""
    session = type(
        "ServedPipelineSession",
        (PipelineSession,),
        {"stores": stores, "customs": dict(customs or {}), "watch_every": watch_every},
    )

    async def authorize(scope: dict[str, Any]) -> PipelineRow | None:
        pipeline, token = _credentials(scope)
        if not pipeline or not token:
            log.warning("pipeline handshake without an id and token from %s", _peer(scope))
            return None
        row = await stores.run(lambda s: s.pipelines.verify(pipeline, token))
        if row is None:
            log.warning("pipeline %r: bad or revoked token from %s", pipeline[:64], _peer(scope))
        return row

    return LiveApp(
        Node,  # a placeholder factory: the server hands it its own node
        [session],
        authorize=authorize,
        framing=PipelineFraming(),
        max_frame=MAX_FRAME,
        burst=BURST,
        rate=RATE,
        cut_after=CUT_AFTER,
    )


def _credentials(scope: dict[str, Any]) -> tuple[str, str]:
    headers = dict(scope.get("headers") or [])
    pipeline = headers.get(b"x-trawl-pipeline", b"").decode("latin-1").strip()
    scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    token = token.strip() if scheme.lower() == "bearer" else ""
    if not pipeline or not token:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        pipeline = pipeline or (query.get("pipeline") or [""])[0]
        token = token or (query.get("token") or [""])[0]
    return pipeline, token


def _peer(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "an unknown peer"
