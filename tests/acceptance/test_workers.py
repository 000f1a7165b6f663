"""Worker processes racing on one database: every job runs and commits exactly once."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import workload
from tests.support.procs import Procs, running, wait_for

pytestmark = pytest.mark.slow

WORKERS = 4
JOBS = 2000
CONCURRENCY = 8

# Every worker's first call leaves a marker and the task waits for "go": the test lets the
# work flow only once all four workers hold leases, so each of them is sure to race.
RACE_APP = """
@app.task(tags=["t"], timeout="60s")
async def work(ctx):
    start = time.time()
    (HERE / "ready" / str(os.getpid())).touch()
    while not (HERE / "go").exists():
        await asyncio.sleep(0.01)
    await asyncio.sleep(random.uniform(0, 0.003))
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return {"pid": os.getpid()}
"""


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def test_four_workers_commit_every_job_exactly_once(
    db_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, RACE_APP)
    (here / "ready").mkdir()
    ids = [f"item:{n:04d}" for n in range(JOBS)]
    workload.seed(db_url, app, ids)

    workers = [
        procs.worker(app, db_url, concurrency=CONCURRENCY, exit_when_idle=True)
        for _ in range(WORKERS)
    ]
    wait_for(lambda: len(list((here / "ready").iterdir())) == WORKERS, "every worker to claim")
    (here / "go").touch()
    for worker in workers:
        assert worker.wait(timeout=60) == 0, worker.describe()

    entries = workload.journal(db_url)
    assert workload.kinds_by_item(entries, "job.done") == Counter(dict.fromkeys(ids, 1))
    unexpected = {"job.stale", "job.released", "job.failed"}
    assert [e for e in entries if e.kind in unexpected] == []
    rows = workload.jobs(db_url)
    assert {(r.status, r.attempt) for r in rows.values()} == {("done", 1)}

    runs = workload.runs(here)
    assert Counter(r.item for r in runs) == Counter(dict.fromkeys(ids, 1)), "an item ran twice"
    assert _overlaps(runs) == []
    per_worker = Counter(r.pid for r in runs)
    assert set(per_worker) == {w.pid for w in workers}, "a worker did no work"
    for pid in per_worker:
        assert _max_in_flight([r for r in runs if r.pid == pid]) <= CONCURRENCY


def _overlaps(runs: list[workload.Run]) -> list[tuple[workload.Run, workload.Run]]:
    """Pairs of runs of one item whose time spans overlap (two leases held at once)."""
    by_item: dict[str, list[workload.Run]] = defaultdict(list)
    for run in runs:
        by_item[run.item].append(run)
    found = []
    for item_runs in by_item.values():
        item_runs.sort(key=lambda r: r.start)
        found += [(a, b) for a, b in itertools.pairwise(item_runs) if b.start < a.end]
    return found


def _max_in_flight(runs: list[workload.Run]) -> int:
    """The most runs that were going on at one instant."""
    events = sorted([(r.start, 1) for r in runs] + [(r.end, -1) for r in runs])
    return max(itertools.accumulate(change for _, change in events))
