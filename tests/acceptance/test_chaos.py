"""Chaos on PostgreSQL: workers killed with SIGKILL at random during a 10,000-job run lose
nothing and commit nothing twice (the database restarting mid-run: test_outage.py)."""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import workload
from tests.support.procs import Proc, Procs, running, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

JOBS = 10_000
WORKERS = 3
KILLS = 20
TIME_LIMIT = 150.0

# Short leases so a killed worker's jobs come back soon; retries enough for the jobs that a
# few kills catch in flight (each kill is a lost attempt, counted against them).
CHAOS_APP = """
@app.task(tags=["t"], timeout="3s", retries=10, backoff="0.05s")
async def work(ctx):
    start = time.time()
    await asyncio.sleep(random.uniform(0.01, 0.04))
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return {"attempt": ctx.attempt}
"""


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def test_twenty_kill_9s_lose_nothing_and_commit_nothing_twice(
    pg_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, CHAOS_APP)
    ids = [f"item:{n:05d}" for n in range(JOBS)]
    workload.seed(pg_url, app, ids)
    started = time.monotonic()
    workers = [procs.worker(app, pg_url, concurrency=8) for _ in range(WORKERS)]
    wait_for(lambda: workload.done_count(pg_url) > 200, "the run to get going")
    rng = random.Random(20)
    killed = 0
    while killed < KILLS and workload.done_count(pg_url) < JOBS - 500:
        victim = rng.choice([w for w in workers if w.alive])
        victim.send(signal.SIGKILL)
        victim.wait(timeout=10)
        killed += 1
        workers = [w for w in workers if w is not victim] + [
            procs.worker(app, pg_url, concurrency=8)
        ]
        time.sleep(rng.uniform(0.2, 0.6))
    assert killed == KILLS, f"the run ended after {killed} kills: make it longer"
    wait_for(
        lambda: workload.done_count(pg_url) == JOBS,
        "every job to be done",
        timeout=TIME_LIMIT - (time.monotonic() - started),
        interval=0.5,
    )
    _stop(workers)

    entries = workload.journal(pg_url)
    done = workload.kinds_by_item(entries, "job.done")
    assert done == Counter(dict.fromkeys(ids, 1)), "a job was lost or committed twice"
    # A stale commit (a slow live worker whose lease lapsed) is refused, never counted.
    lost = [e for e in entries if e.kind == "job.failed"]
    assert lost, "the kills caught attempts in flight: they are settled as lost"
    assert {r.status for r in workload.jobs(pg_url).values()} == {"done"}


def _stop(workers: list[Proc]) -> None:
    for worker in workers:
        worker.send(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=30) == 0, worker.describe()
