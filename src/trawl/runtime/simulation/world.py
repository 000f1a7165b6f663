"""The simulated sources: when each item changes, and how each visit ends.

Every random draw is a hash of (seed, item, counter), not a step of a shared generator, so
each item's changes are the same whichever policy visits it and in whatever order: two
policies simulated with one seed meet the same world. Items change as Poisson processes
whose rates are log-uniform between the two bounds (most items change rarely, a few
often: the skew adaptive revisits are for).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from trawl.model.errors import InvalidInput

_MASK = (1 << 64) - 1
DAY = 86400.0


def _mix(value: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def uniform(seed: int, *keys: int) -> float:
    """A number in (0, 1) determined by *seed* and *keys*."""
    value = seed & _MASK
    for key in keys:
        value = _mix(value ^ (key & _MASK))
    return ((value >> 11) + 0.5) / float(1 << 53)


class Visit(StrEnum):
    CHANGED = "changed"  # the source changed since our last look: an eventful result
    SAME = "same"
    FAILED = "failed"  # a transient error
    NOT_FOUND = "not_found"


@dataclass(frozen=True, kw_only=True, slots=True)
class WorldSpec:
    items: int
    seed: int = 1
    min_rate: float = 1 / 3650  # changes per day of the slowest items (once in ten years)
    max_rate: float = 2.0  # and of the fastest
    failure_rate: float = 0.01
    not_found_rate: float = 0.001

    def __post_init__(self) -> None:
        if self.items < 1:
            raise InvalidInput(f"simulate at least one item, not {self.items}")
        if not 0 < self.min_rate <= self.max_rate:
            raise InvalidInput(
                f"change rates need 0 < min <= max, got {self.min_rate:g}..{self.max_rate:g}"
            )
        for name in ("failure_rate", "not_found_rate"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise InvalidInput(f"{name.replace('_', ' ')} must be in [0, 1), got {value:g}")
        if self.failure_rate + self.not_found_rate >= 1:
            raise InvalidInput("failure and not-found rates must add up to less than 1")


class World:
    """The sources' state as seen by one policy's run: what changed that we have not seen."""

    def __init__(self, spec: WorldSpec, start: float) -> None:
        self.spec = spec
        span = math.log(spec.max_rate / spec.min_rate)
        self.rates = [
            spec.min_rate * math.exp(span * uniform(spec.seed, 1, n)) / DAY
            for n in range(spec.items)
        ]
        self._changes = [0] * spec.items  # changes drawn so far, per item
        self._visits = [0] * spec.items
        # The first change we have not seen, per item: everything starts unseen.
        self.unseen_since = [start] * spec.items
        self._next = [start] * spec.items  # the next change time drawn, per item
        self.version = [0] * spec.items

    def visit(self, n: int, now: float) -> Visit:
        """Item *n* visited at *now*: how the visit ends."""
        self._visits[n] += 1
        draw = uniform(self.spec.seed, 2, n, self._visits[n])
        if draw < self.spec.not_found_rate:
            return Visit.NOT_FOUND
        if draw < self.spec.not_found_rate + self.spec.failure_rate:
            return Visit.FAILED
        if self.unseen_since[n] > now:
            return Visit.SAME
        while self._next[n] <= now:  # the changes up to now, then the first one after
            self._changes[n] += 1
            gap = -math.log(uniform(self.spec.seed, 3, n, self._changes[n])) / self.rates[n]
            self._next[n] += gap
        self.unseen_since[n] = self._next[n]
        self.version[n] += 1
        return Visit.CHANGED

    def freshness(self, now: float) -> tuple[float, float]:
        """(share of items whose latest version we hold, mean staleness in seconds)."""
        stale = [now - t for t in self.unseen_since if t <= now]
        return 1 - len(stale) / self.spec.items, sum(stale) / self.spec.items
