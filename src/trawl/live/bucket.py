"""The token bucket that paces one WebSocket client.

Each frame takes a token; tokens come back at ``rate`` per second up to ``burst``. A frame
that finds the bucket empty is not refused but delayed until its token would have come (the
client is slowed); the debt this builds is how far over its rate the client has been. Past
``cut_after`` tokens of debt, the client is cut off.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self,
        burst: int = 10,
        rate: float = 2.0,
        cut_after: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or rate <= 0 or cut_after < 0:
            raise ValueError("burst >= 1, rate > 0 and cut_after >= 0 are needed")
        self.burst, self.rate, self.cut_after, self.clock = burst, rate, cut_after, clock
        self.tokens = float(burst)
        self._last = clock()

    def take(self) -> float | None:
        """Seconds to wait before the frame is handled, or None: cut the client off."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self._last) * self.rate) - 1
        self._last = now
        if self.tokens < -self.cut_after:
            return None
        return max(0.0, -self.tokens / self.rate)
