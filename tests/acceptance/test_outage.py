"""The database going away: at start a clear error, during a run a pause and no lost job."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import pg, workload
from tests.support.procs import Procs, running, wait_for
from trawl.store import migrate
from trawl.store.store import Store

JOBS = 300

OUTAGE_APP = """
@app.task(tags=["t"], timeout="60s")
async def work(ctx):
    start = time.time()
    await asyncio.sleep(random.uniform(0.01, 0.02))
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return {"ok": True}
"""


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


@pytest.fixture
def cluster() -> Iterator[pg.Cluster]:
    """A server of this test's own, so the test can stop it."""
    with pg.Cluster() as cluster:
        cluster.start()
        yield cluster


@pytest.mark.slow
@pytest.mark.postgres
def test_worker_waits_out_a_database_outage_and_loses_nothing(
    cluster: pg.Cluster, tmp_path: Path, procs: Procs
) -> None:
    url = pg.create_database(cluster.url, "trawl")
    with Store(url) as store:
        migrate.upgrade(store.db)
    here = tmp_path / "app"
    app = workload.write_app(here, OUTAGE_APP)
    ids = [f"item:{n:03d}" for n in range(JOBS)]
    workload.seed(url, app, ids)
    worker = procs.worker(app, url, concurrency=2, exit_when_idle=True)
    wait_for(lambda: workload.done_count(url) >= 30, "the run to get going")

    cluster.stop("fast")
    down_at = time.time()
    wait_for(lambda: "retrying" in worker.stderr(), "the worker to notice the outage", timeout=10)
    time.sleep(max(0.0, down_at + 2.0 - time.time()))  # the outage lasts a couple of seconds
    assert worker.alive, worker.describe()
    cluster.start()
    up_at = time.time()

    assert worker.wait(timeout=45) == 0, worker.describe()
    entries = workload.journal(url)
    assert workload.kinds_by_item(entries, "job.done") == Counter(dict.fromkeys(ids, 1))
    assert [e for e in entries if e.kind in ("job.failed", "job.released")] == []
    commits = [e.at for e in entries if e.kind == "job.done"]
    assert min(commits) < down_at < up_at < max(commits), "the outage must fall mid-run"
    assert {r.status for r in workload.jobs(url).values()} == {"done"}
    assert "Traceback" not in worker.stderr()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_worker_refuses_to_start_without_its_database(
    backend: str, tmp_path: Path, procs: Procs
) -> None:
    if backend == "sqlite":
        where = f"{tmp_path}/no-such-dir/trawl.db"
        url = f"sqlite:///{where}"
    else:
        where = f"127.0.0.1:{pg.free_port()}/trawl"  # nothing listens on this port
        url = f"postgresql://postgres@{where}"
    app = workload.write_app(tmp_path / "app", OUTAGE_APP)
    worker = procs.worker(app, url)
    assert worker.wait(timeout=30) != 0
    stderr = worker.stderr()
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    assert f"cannot reach the database at {url}" in errors[0]
    assert where in errors[0]
