"""A worker measures its clock against the database's, refuses past the limit, or runs on
the database's time when asked (local clocks are shifted here; the measurement is real)."""

from __future__ import annotations

import asyncio
import time

import pytest

from trawl.runtime.app import App
from trawl.runtime.clock import ClockSkew, WorkerClock
from trawl.runtime.worker import Worker
from trawl.store.store import Store


def ahead(seconds: float) -> WorkerClock:
    return WorkerClock(local=lambda: time.time() + seconds)


@pytest.mark.postgres
def test_the_offset_is_measured_against_the_database(pg_url: str) -> None:
    with Store(pg_url) as store:
        assert abs(store.clock_offset()) < 0.5
        assert store.clock_offset(lambda: time.time() + 10) == pytest.approx(-10, abs=0.5)


def test_sqlite_shares_the_machine_clock(sqlite_url: str) -> None:
    with Store(sqlite_url) as store:
        assert store.clock_offset(lambda: time.time() + 10) == 0.0


@pytest.mark.postgres
def test_past_the_limit_a_worker_refuses_to_start_and_says_why(pg_url: str) -> None:
    app = App()
    app.task(tags=["t"])(lambda ctx: None)
    worker = Worker(app, url=pg_url, exit_when_idle=True, clock=ahead(10))
    with pytest.raises(ClockSkew, match=r"clock is 10\.\ds ahead of the database's"):
        asyncio.run(worker.run())


@pytest.mark.postgres
def test_asked_to_it_runs_on_the_database_time(pg_url: str) -> None:
    clock = ahead(10)
    clock.use_database = True
    with Store(pg_url) as store:
        clock.check(store)
    assert clock.offset == pytest.approx(-10, abs=0.5)
    assert clock.now() == pytest.approx(time.time(), abs=0.5)


@pytest.mark.postgres
def test_within_the_limit_nothing_changes(pg_url: str) -> None:
    clock = ahead(1)
    with Store(pg_url) as store:
        clock.check(store)
    assert clock.offset == 0.0
