"""A store on each backend with a clock the test moves by hand."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.helpers import FakeClock
from trawl.store.store import Store


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[Store]:
    with Store(db_url, clock=clock) as opened:
        yield opened
