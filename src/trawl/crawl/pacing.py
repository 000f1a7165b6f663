"""When a request may go out on the wire: from its politeness start until a moment later.

The gate plans a host's next start ``delay + slack(delay)`` after this one (politeness.py). A
request that goes out more than half of that slack after its own start could land closer
than the delay to the next one, so it must not go: the HTTP client checks
:func:`latest_send` right before it writes the request (client.LateStart) and the attempt
plans again.
"""

from __future__ import annotations

import asyncio
import math
import time

from trawl.crawl.client import HostHeldOff
from trawl.crawl.politeness import slack
from trawl.crawl.state import ProcessState
from trawl.runtime.context import Context


def latest_send(delay: float) -> float:
    """How long after its permitted start a request on a host with *delay* may still go
    out (no limit without a delay)."""
    return slack(delay) / 2 if delay > 0 else math.inf


def held_off(host: str) -> HostHeldOff:
    """The error of a request that found its host held off (a 429 or 503) before it went."""
    return HostHeldOff(f"{host} asked to be left alone for now (429/503)")


class Starts:
    """The starts one request takes on its host beyond its attempt's own permit: a
    redirect of robots.txt, a browser's sub-request, or a request whose connection made it
    miss its start. :meth:`take` waits for the next and returns the moment, on this
    machine's clock, by which the request must then go out; a missed start (*start*, the
    plan's, or the last one taken here, on the permit's clock) moves to now when no later
    start on the host was reserved meanwhile (politeness.pace_host)."""

    def __init__(
        self,
        ctx: Context,
        rt: ProcessState,
        host: str,
        delay: float,
        start: float | None = None,
    ) -> None:
        self.ctx, self.rt, self.host, self.delay = ctx, rt, host, delay
        self.start = start

    async def take(self) -> float:
        """Raises HostHeldOff while the host is held off (a 429 or 503)."""
        host = self.host
        if self.rt.blocked.get(host, 0.0) > time.time():
            raise held_off(host)
        if self.delay <= 0:
            return math.inf  # no spacing to keep: no round trip to the gate
        start = await self.rt.port.pace(self.ctx, host, self.delay, self.start)
        if start is None:
            raise held_off(host)
        self.start = start
        local = self.rt.port.local_time(start)
        wait = local - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        return local + latest_send(self.delay)
