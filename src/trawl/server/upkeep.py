"""The API server's housekeeping. Remote pipelines commit through the server, so it keeps
the planner's statistics up with the tables' growth and vacuums the tables that churn as a
worker does (store/planner_stats.py, store/vacuum.py), every few seconds: it looks on a
connection of its pool (quick reads) and analyzes or vacuums on a connection of its own, so
no request waits for an ANALYZE or a VACUUM."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from trawl.model.errors import DatabaseUnavailable
from trawl.server.stores import Stores
from trawl.store import planner_stats
from trawl.store.store import analyze_apart, vacuum_apart

log = logging.getLogger("trawl.server")


class Upkeep:
    def __init__(self, stores: Stores, *, every: float = planner_stats.EVERY) -> None:
        self.stores = stores
        self.every = every
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                stale = await self.stores.run(lambda store: store.stale_statistics())
                if stale:
                    await asyncio.to_thread(analyze_apart, self.stores.url, stale)
                crowded = await self.stores.run(lambda store: store.crowded_tables())
                if crowded:
                    await asyncio.to_thread(vacuum_apart, self.stores.url, crowded)
            except DatabaseUnavailable as error:  # requests say so; this tries again later
                log.debug("upkeep skipped: %s", error)
            except Exception:  # housekeeping must never take the server down: said, retried
                log.warning("upkeep failed (tried again in %gs)", self.every, exc_info=True)
