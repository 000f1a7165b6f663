"""Telling connected pipelines' sessions something, wherever in the cluster they run."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from trawl.server.pipelines.session import EVERY, SERVICE

if TYPE_CHECKING:
    from trawl.server.live import Live

log = logging.getLogger("trawl.pipelines")


async def tell_pipelines(live: Live, action: str, body: Any) -> int:
    """Send *action* to every connected pipeline's session; how many were told."""
    node = live.node
    if node is None:
        return 0
    told = 0
    for address in node.lookup_all(EVERY, "mixed"):
        try:
            await node.send(address, action, body)
            told += 1
        except Exception as error:  # it ended meanwhile
            log.debug("session %s did not take %s: %s", address, action, error)
    return told


async def tell_pipeline(live: Live, pipeline_id: str, action: str, body: Any) -> bool:
    """Send *action* to one pipeline's session wherever it is; whether one was found."""
    node = live.node
    address = node.lookup(SERVICE.format(pipeline_id), "mixed") if node is not None else None
    if node is None or address is None:
        return False
    try:
        await node.send(address, action, body)
    except Exception as error:  # it ended meanwhile: its row says so soon enough
        log.info("pipeline %s: session %s did not take %s: %s", pipeline_id, address, action, error)
        return False
    return True
