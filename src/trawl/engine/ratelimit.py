"""GCRA (the generic cell rate algorithm): one timestamp per limit and key decides a permit.

``tat`` is the theoretical arrival time of the next permit. A permit is free when
``now >= tat - tolerance``; taking it moves ``tat`` one interval on (from ``now`` if the key
was idle for longer than an interval). ``tolerance`` is ``(burst - 1) * interval``: with a
burst of 1, permits keep one interval apart on average and any window of N intervals holds
at most N + 1 of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    tat: float  # the new state if allowed, else the old one
    at: float  # when a permit is (or was) free


def decide(tat: float | None, now: float, interval: float, burst: int) -> Decision:
    """Whether a permit is free at *now* given the stored *tat* (``None``: never used)."""
    tolerance = (burst - 1) * interval
    current = now if tat is None else tat
    free_at = current - tolerance
    if now < free_at:
        return Decision(False, current, free_at)
    # A claim reaches a permit a little after it fell due (the wake-up, the claim's own
    # queries). Taken less than one interval late, the permit keeps its place in the
    # schedule, so that latency does not lower the rate; later than that, the key was idle
    # and starts afresh. Either way no window of N intervals holds more than N + burst.
    start = current if now - current < interval else now
    return Decision(True, start + interval, now)
