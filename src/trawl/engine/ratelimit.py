"""GCRA (the generic cell rate algorithm): one timestamp per limit and key decides a permit.

``tat`` is the theoretical arrival time of the next permit. A permit is free when
``now >= tat - tolerance``; taking it moves ``tat`` one interval on. ``tolerance`` is
``(burst - 1) * interval``, so a burst of 1 is perfectly smooth.
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
    if now >= free_at:
        return Decision(True, max(current, now) + interval, now)
    return Decision(False, current, free_at)
