"""Stopping workers: kill -9 loses nothing, SIGTERM hands unfinished work back at once."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import workload
from tests.support.procs import Procs, running, wait_for
from trawl.engine.claim import TaskGate, claim
from trawl.runtime.worker import SWEEP_EVERY
from trawl.store.store import Store

pytestmark = pytest.mark.slow

LEASE = 2.0

# item:stuck blocks on its first attempt, after writing the pid of the worker running it.
CRASH_APP = f"""
@app.task(tags=["t"], timeout="{LEASE:g}s")
async def work(ctx):
    start = time.time()
    if ctx.id == "item:stuck" and ctx.attempt == 1:
        (HERE / "stuck.tmp").write_text(str(os.getpid()))
        (HERE / "stuck.tmp").rename(HERE / "stuck")
        await asyncio.sleep(3600)
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return {{"attempt": ctx.attempt}}
"""

# item:slow never finishes by itself; item:finishing finishes once the test says so. The
# task is written as a coroutine or as a plain function (which a worker runs on a thread).
STOP_APP = """
@app.task(tags=["t"], timeout="{timeout}")
{define} work(ctx):
    start = time.time()
    if ctx.id == "item:slow":
        (HERE / "slow").touch()
        {sleep}(3600)
    if ctx.id == "item:finishing":
        (HERE / "finishing").touch()
        while not (HERE / "finish").exists():
            {sleep}(0.01)
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return {{"ok": True}}
"""
STYLES = {
    "async": {"define": "async def", "sleep": "await asyncio.sleep"},
    "def": {"define": "def", "sleep": "time.sleep"},
}


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def _job(url: str, item: str) -> workload.JobRow:
    return workload.jobs(url)[item]


def _status_is(url: str, item: str, status: str) -> bool:
    return _job(url, item).status == status


def test_job_of_a_killed_worker_is_reclaimed_after_its_lease(
    db_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, CRASH_APP)
    # Two one-slot workers: whichever claims item:stuck first (the nicer job, so claimed
    # first) is busy with it; the other runs item:probe and then polls for work.
    workload.seed(db_url, app, ["item:stuck", "item:probe"], niceness={"item:stuck": -1})
    pair = [procs.worker(app, db_url, concurrency=1) for _ in range(2)]

    holder_pid = int(wait_for(lambda: _read(here / "stuck"), "item:stuck to start"))
    holder, survivor = sorted(pair, key=lambda w: w.pid != holder_pid)
    held = _job(db_url, "item:stuck")
    assert (held.status, held.attempt) == ("running", 1)
    assert f":{holder.pid}:" in str(held.owner)
    holder.send(signal.SIGKILL)
    assert holder.wait(timeout=10) == -signal.SIGKILL
    killed_at = time.time()
    lease = _job(db_url, "item:stuck")
    assert lease.status == "running"
    assert lease.due_at is not None
    assert killed_at < lease.due_at <= killed_at + LEASE, "the lease should still be running"

    wait_for(lambda: _status_is(db_url, "item:stuck", "done"), "item:stuck to be redone")
    runs = workload.runs(here)
    assert Counter(r.item for r in runs) == Counter({"item:stuck": 1, "item:probe": 1})
    by_item = {r.item: r for r in runs}
    rerun, probe = by_item["item:stuck"], by_item["item:probe"]
    assert (rerun.attempt, rerun.pid, probe.pid) == (2, survivor.pid, survivor.pid)
    # Not before the lease ran out and the lost attempt's backoff (half the 2 s base at
    # least) passed; at most a sweep interval, the full backoff and a poll after that.
    latest = max(lease.due_at, probe.start) + SWEEP_EVERY + 2.0 + 2.0
    assert lease.due_at + 1.0 <= rerun.start <= latest

    survivor.send(signal.SIGTERM)
    assert survivor.wait(timeout=15) == 0, survivor.describe()
    entries = workload.journal(db_url)
    done = workload.kinds_by_item(entries, "job.done")
    assert done == Counter({"item:stuck": 1, "item:probe": 1})
    assert [
        e.detail["attempt"] for e in entries if e.kind == "job.done" and e.item_id == "item:stuck"
    ] == [2]
    assert [e for e in entries if e.kind == "job.stale"] == []
    lost = [e for e in entries if e.kind == "job.failed"]
    assert [(e.item_id, e.detail["attempt"]) for e in lost] == [("item:stuck", 1)]
    final = _job(db_url, "item:stuck")
    assert (final.status, final.attempt) == ("done", 2)


@pytest.mark.parametrize("style", list(STYLES))
def test_sigterm_finishes_running_work_and_releases_the_rest(
    style: str, db_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, STOP_APP.format(timeout="60s", **STYLES[style]))
    quick = [f"item:quick-{n}" for n in range(10)]
    workload.seed(db_url, app, ["item:slow", "item:finishing", *quick])
    worker = procs.worker(app, db_url, concurrency=16, grace=1)
    wait_for(lambda: (here / "slow").exists() and (here / "finishing").exists(), "tasks to start")
    wait_for(lambda: workload.done_count(db_url) == len(quick), "the quick jobs to commit")

    signalled, signalled_wall = time.monotonic(), time.time()
    worker.send(signal.SIGTERM)
    (here / "finish").touch()  # item:finishing ends inside the grace period; item:slow cannot
    assert worker.wait(timeout=10) == 0, worker.describe()
    took = time.monotonic() - signalled
    assert 1.0 <= took <= 5.0, f"stopping took {took:.2f}s with --grace 1"
    assert "Traceback" not in worker.stderr()

    rows = workload.jobs(db_url)
    slow = rows.pop("item:slow")
    assert (slow.status, slow.attempt, slow.owner) == ("queued", 1, None)
    assert slow.due_at is not None
    assert signalled_wall <= slow.due_at <= time.time(), "a released job is due now"
    assert {(r.status, r.attempt) for r in rows.values()} == {("done", 1)}
    entries = workload.journal(db_url)
    assert workload.kinds_by_item(entries, "job.released") == Counter({"item:slow": 1})
    assert workload.kinds_by_item(entries, "job.done") == Counter(dict.fromkeys(rows, 1))


def test_second_sigterm_exits_at_once_and_the_lease_expires(
    db_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, STOP_APP.format(timeout="3s", **STYLES["async"]))
    workload.seed(db_url, app, ["item:slow"])
    worker = procs.worker(app, db_url, concurrency=2, grace=30)
    wait_for(lambda: (here / "slow").exists(), "item:slow to start")

    worker.send(signal.SIGTERM)
    wait_for(lambda: "SIGTERM" in worker.stderr(), "the worker to acknowledge the first SIGTERM")
    assert worker.alive, "the first SIGTERM must wait for the running task"
    again = time.monotonic()
    worker.send(signal.SIGTERM)
    code = worker.wait(timeout=5)
    assert code != 0, worker.describe()
    assert time.monotonic() - again < 2.0, "a second signal exits at once"

    lease = _job(db_url, "item:slow")
    assert (lease.status, lease.attempt) == ("running", 1), "nothing released on a hard exit"
    assert lease.due_at is not None
    assert lease.due_at > time.time(), "the lease should still be held"
    with Store(db_url) as store:
        lapsed = wait_for(lambda: store.lapsed(["work"], 10), "the lease to lapse", timeout=10)
        # A lapsed lease is a crashed attempt: it is not leased again as it is, but settled
        # as lost first (tests/acceptance/test_crashes.py), by whoever serves the task.
        assert time.time() >= lease.due_at - 0.1
        assert claim(store, [TaskGate(name="work", timeout=30.0)], 10, "test").jobs == []
    assert [(job.item_id, job.attempt, owner) for job, owner in lapsed] == [
        ("item:slow", 1, lease.owner)
    ]
    kinds = {e.kind for e in workload.journal(db_url)}
    assert not kinds & {"job.released", "job.done", "job.failed"}


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""
