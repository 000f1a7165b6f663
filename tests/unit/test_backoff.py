import random

import pytest

from trawl.engine import backoff
from trawl.engine.backoff import MAX_DELAY


@pytest.mark.parametrize(("failures", "step"), [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0)])
def test_doubles_with_jitter_in_the_upper_half(failures: int, step: float) -> None:
    rng = random.Random(7)
    delays = [backoff.delay(failures, 10, 2.0, rng) for _ in range(200)]
    assert all(d is not None and step / 2 <= d <= step for d in delays)
    assert len({round(d or 0, 6) for d in delays}) > 100  # jitter spreads them out


def test_none_once_retries_are_used_up() -> None:
    assert backoff.delay(3, 3, 1.0) is not None
    assert backoff.delay(4, 3, 1.0) is None
    assert backoff.delay(1, 0, 1.0) is None


def test_capped() -> None:
    delay = backoff.delay(40, 100, 2.0)
    assert delay is not None
    assert delay <= MAX_DELAY
