"""Retry delays: exponential with jitter, capped."""

from __future__ import annotations

import random

MAX_DELAY = 3600.0


def delay(
    failures: int, retries: int, base: float, rng: random.Random | None = None
) -> float | None:
    """Delay before the next attempt after *failures* consecutive failures, or ``None`` when
    the *retries* allowed after the first failure are used up.

    Jitter draws from the upper half of the exponential step so that many jobs failing
    together (a site going down) spread out without ever retrying sooner than half the step.
    """
    if failures > retries:
        return None
    step: float = min(MAX_DELAY, base * 2.0 ** max(0, failures - 1))
    jitter: float = (rng or random).uniform(0.5, 1.0)
    return step * jitter
