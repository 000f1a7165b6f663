"""Clock skew: leases, due times and rate-limit slots are wall-clock times that workers on
many machines write into one database, so a worker whose clock is off reclaims leases
early, runs jobs before they are due, or starves them. Each worker measures its offset from
the database's clock when it connects and every few minutes; past ``max_skew`` it refuses
to start, or, if asked, runs on the database's time instead and says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from trawl.model.errors import TrawlError
from trawl.store.store import Store

log = logging.getLogger("trawl.clock")

DEFAULT_MAX_SKEW = 2.0
CHECK_EVERY = 300.0  # seconds between measurements while a worker runs


class ClockSkew(TrawlError):
    """This machine's clock is too far from the database's."""


@dataclass(kw_only=True, slots=True)
class WorkerClock:
    """The time a worker writes: its own clock, plus the database's offset if it uses that."""

    local: Callable[[], float] = time.time
    max_skew: float = DEFAULT_MAX_SKEW
    use_database: bool = False
    offset: float = field(default=0.0)

    def now(self) -> float:
        return self.local() + self.offset

    def check(self, store: Store) -> None:
        """Measure the offset from *store*'s database; refuse, adopt or accept it."""
        measured = store.clock_offset(self.local)
        if abs(measured) <= self.max_skew:
            self.offset = 0.0
            return
        side = "behind" if measured > 0 else "ahead of"
        what = f"this machine's clock is {abs(measured):.1f}s {side} the database's"
        if not self.use_database:
            raise ClockSkew(
                f"{what} (more than --max-clock-skew {self.max_skew:g}s): fix its time "
                "sync (NTP), or pass --use-database-clock to run on the database's time"
            )
        if abs(measured - self.offset) > self.max_skew / 2:
            log.warning("%s: using the database's time", what)
        self.offset = measured

    def recheck(self, store: Store) -> None:
        """The periodic measurement: a drift past the limit is logged, not fatal."""
        try:
            self.check(store)
        except ClockSkew as error:
            log.error("%s", error)
