"""Remote pipelines as users run them: `trawl serve`, `trawl pipeline create` and `trawl
worker --server` processes beside a local worker on one PostgreSQL database, with a remote
worker killed and the tracker restarted mid-run."""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import pg, workload
from tests.support.procs import Proc, Procs, running, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

JOBS = 2000

APP = """
@app.task(tags=["t"], timeout="5s", retries=5, backoff="0.2s")
async def work(ctx):
    await asyncio.sleep(random.uniform(0.005, 0.02))
    ctx.update_data(lambda d: {**d, "by": ctx.task})
    return {"pid": os.getpid()}
"""


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def serve(procs: Procs, db: str, port: int) -> Proc:
    tracker = procs.trawl(
        "--db", db, "serve", "--port", str(port), name=f"serve-{len(procs.started)}"
    )
    wait_for(lambda: _healthy(port) or not tracker.alive, "the tracker to listen", timeout=30)
    assert tracker.alive, tracker.describe()
    return tracker


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def remote(procs: Procs, app: str, port: int, pipeline: str, token: str) -> Proc:
    procs.env["TRAWL_PIPELINE_TOKEN"] = token
    try:
        return procs.trawl(
            "worker",
            app,
            "--server",
            f"ws://127.0.0.1:{port}",
            "--pipeline",
            pipeline,
            "--concurrency",
            "8",
            "--no-progress",
            name=f"remote-{pipeline}-{len(procs.started)}",
        )
    finally:
        del procs.env["TRAWL_PIPELINE_TOKEN"]


def create_pipeline(procs: Procs, db: str, name: str) -> str:
    made = procs.trawl("--db", db, "pipeline", "create", name, "--slots", "8", "--json")
    assert made.wait(timeout=30) == 0, made.describe()
    answer = json.loads(made.stdout())
    assert answer["id"] == name
    return str(answer["token"])


def test_remote_and_local_workers_commit_every_job_once_through_a_kill_and_a_restart(
    pg_url: str, tmp_path: Path, procs: Procs
) -> None:
    app = workload.write_app(tmp_path / "app", APP)
    ids = [f"item:{n:04d}" for n in range(JOBS)]
    workload.seed(pg_url, app, ids)
    port = pg.free_port()
    tokens = {name: create_pipeline(procs, pg_url, name) for name in ("r1", "r2")}
    tracker = serve(procs, pg_url, port)
    first = remote(procs, app, port, "r1", tokens["r1"])
    second = remote(procs, app, port, "r2", tokens["r2"])
    local = procs.worker(app, pg_url, concurrency=8)

    wait_for(lambda: workload.done_count(pg_url) >= 300, "the run to get going", timeout=60)
    first.send(signal.SIGKILL)  # mid-batch: its attempts come back when their leases lapse
    killed_at = workload.done_count(pg_url)
    wait_for(lambda: workload.done_count(pg_url) >= killed_at + 300, "more work after the kill")
    tracker.send(signal.SIGKILL)  # the tracker dies with sessions open and replies in flight
    time.sleep(random.uniform(0.5, 1.5))
    tracker = serve(procs, pg_url, port)
    replacement = remote(procs, app, port, "r1", tokens["r1"])

    try:
        wait_for(lambda: workload.done_count(pg_url) == JOBS, "every job to be done", timeout=180)
    except AssertionError:
        raise AssertionError(_stuck(pg_url, procs)) from None
    for worker in (second, replacement, local):
        assert worker.alive, worker.describe()
        worker.send(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, worker.describe()

    entries = workload.journal(pg_url)
    assert workload.kinds_by_item(entries, "job.done") == Counter(dict.fromkeys(ids, 1))
    changes = workload.kinds_by_item(entries, "item.updated")
    assert set(changes) == set(ids)  # every item's data patch landed...
    assert max(changes.values()) <= 2  # ...once, or twice after an attempt lost mid-commit
    lost = [
        e
        for e in entries
        if e.kind == "job.failed" and (e.detail or {}).get("error_type") == "lost"
    ]
    assert lost, "the killed worker's attempts came back as lost attempts"
    assert "Traceback" not in second.stderr() + replacement.stderr()
    assert "reconnected to" in second.stderr(), second.describe()


def _stuck(db: str, procs: Procs) -> str:
    """What a run that never finished left behind: the unfinished jobs, and every process."""
    now = time.time()
    left = {item: job for item, job in workload.jobs(db).items() if job.status != "done"}
    shown = [
        f"{item}: {job.status} attempt {job.attempt} owner {job.owner} "
        f"due in {(job.due_at or now) - now:.1f}s"
        for item, job in sorted(left.items())[:20]
    ]
    described = [
        f"--- {proc.name} (exit {proc.popen.returncode}), stderr's end:\n{proc.stderr()[-2000:]}"
        for proc in procs.started
    ]
    return "\n".join([f"{len(left)} jobs not done:", *shown, *described])


def test_a_revoked_pipeline_stops_and_a_bad_token_never_starts(
    pg_url: str, tmp_path: Path, procs: Procs
) -> None:
    app = workload.write_app(tmp_path / "app", APP)
    port = pg.free_port()
    token = create_pipeline(procs, pg_url, "r1")
    serve(procs, pg_url, port)
    bad = remote(procs, app, port, "r1", "not-the-token")
    assert bad.wait(timeout=30) == 1
    errors = [line for line in bad.stderr().splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: the tracker at ws://127.0.0.1:{port}/ws/pipeline refused pipeline 'r1': its "
        "id or token is wrong, or the token was rotated (HTTP 401)"
    ], bad.describe()
    good = remote(procs, app, port, "r1", token)
    wait_for(lambda: "pipeline r1 on" in good.stderr(), "the pipeline to be welcomed")
    rotate = procs.trawl("--db", pg_url, "pipeline", "rotate-token", "r1")
    assert rotate.wait(timeout=30) == 0
    assert good.wait(timeout=40) == 1, good.describe()  # the session re-reads its row in 10 s
    assert "the tracker stopped pipeline 'r1'" in good.stderr()
