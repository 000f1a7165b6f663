"""When to look again: adaptive revisit intervals and failure cooldowns (Software Heritage).

SWH keeps, per origin, an offset that moves -2 on an eventful visit (something changed) and +1
on an uneventful one, clamped to 0..10, and maps it to a number of days: 1 for offsets 0-1,
2 for 2-4, then 4**(offset-4). trawl scales that day count into the task's [min, max]
geometrically (1 day -> min, 4**6 days -> max), so each step multiplies the interval by a
constant factor whatever the bounds, and adds +-10% jitter so revisits spread out.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from trawl.model.durations import Duration, seconds
from trawl.model.errors import InvalidInput

MAX_OFFSET = 10
_MAX_DAYS = 4.0 ** (MAX_OFFSET - 4)
JITTER = 0.1


@dataclass(frozen=True, kw_only=True, slots=True)
class Adaptive:
    """``revisit=adaptive(min="1h", max="30d")``: revisit often what changes often."""

    min: float
    max: float


def adaptive(*, min: Duration, max: Duration) -> Adaptive:
    """An adaptive revisit policy between *min* and *max*."""
    low, high = seconds(min), seconds(max)
    if not 0 < low <= high:
        raise InvalidInput(f"adaptive revisit needs 0 < min <= max, got min={min!r} max={max!r}")
    return Adaptive(min=low, max=high)


def next_offset(offset: int, eventful: bool) -> int:
    """The SWH offset after a visit."""
    moved = offset - 2 if eventful else offset + 1
    return max(0, min(MAX_OFFSET, moved))


def offset_days(offset: int) -> float:
    """SWH's day count for an offset."""
    if offset <= 1:
        return 1.0
    if offset <= 4:
        return 2.0
    return 4.0 ** (offset - 4)


def interval(policy: Adaptive, offset: int) -> float:
    """Seconds until the next visit for *offset*, before jitter."""
    fraction = math.log(offset_days(offset)) / math.log(_MAX_DAYS)
    return float(policy.min * (policy.max / policy.min) ** fraction)


def jittered(value: float, rng: random.Random | None = None) -> float:
    return value * (1 + (rng or random).uniform(-JITTER, JITTER))


@dataclass(frozen=True, kw_only=True, slots=True)
class Cooldowns:
    """How long failed jobs wait. ``not_found``: the source says the thing is gone (raise
    ``trawl.NotFound``); after ``not_found_limit`` such results in a row the job is disabled
    until the item is relisted. ``exhausted``: after the last retry of a transient failure
    (``None``: the job stays failed until someone retries it)."""

    not_found: float = 31 * 86400.0
    not_found_limit: int = 3
    exhausted: float | None = None


def not_found_delay(cooldowns: Cooldowns, previous_not_found: int) -> float | None:
    """Delay after a not-found result, or ``None`` once the job is to be disabled."""
    if previous_not_found + 1 >= cooldowns.not_found_limit:
        return None
    return cooldowns.not_found
