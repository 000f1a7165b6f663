"""A real worker, run in this process until it is idle, against each backend."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

import pytest

import trawl
from tests.integration.helpers import item, job_of, sql_statements_by_thread
from trawl.engine.claim import ClaimBatch
from trawl.model.errors import DatabaseUnavailable
from trawl.model.records import FailureRecord
from trawl.runtime import attempt as attempt_module
from trawl.runtime import loop as process_loop
from trawl.runtime import worker as worker_module
from trawl.runtime.actor.handle import EXIT_REPLACE
from trawl.runtime.backend import LocalBackend, LocalLane
from trawl.runtime.worker import Worker
from trawl.store.store import Store

COUNT = 20

# The worker's listener thread must not crash when the worker stops.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")


def run(app: trawl.App, url: str, tasks: list[str] | None = None) -> Worker:
    worker = Worker(app, url=url, concurrency=8, exit_when_idle=True, tasks=tasks, grace=5)
    assert asyncio.run(worker.run()) == 0
    return worker


def add(url: str, *items: Any) -> None:
    with Store(url) as store:
        store.add_items(list(items))


def products(url: str, count: int = COUNT) -> list[str]:
    ids = [f"sku:{n}" for n in range(count)]
    add(url, *(item(i, "product", n=n) for n, i in enumerate(ids)))
    return ids


def results(url: str, ids: list[str], task: str = "price") -> dict[str, Any]:
    """The stored result of *task* per item; also checks the worker left nothing running."""
    with Store(url) as store:
        assert all(s.running == 0 for s in store.status()), "the worker left a job running"
        return {i: job_of(store, i, task).result for i in ids}


def failures(url: str) -> list[FailureRecord]:
    with Store(url) as store:
        return store.failures()


def test_a_result_that_is_not_json_fails_only_its_job(db_url: str) -> None:
    app = trawl.App()

    @app.task(tags=["product"], retries=0)
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        if ctx.id == "sku:3":
            return {"when": object()}
        if ctx.id == "sku:4":
            return [1, 2]  # type: ignore[return-value]
        return {"n": ctx.data["n"]}

    ids = products(db_url)
    worker = run(app, db_url)
    assert (worker.stats.done, worker.stats.failed) == (COUNT - 2, 2)
    messages = {f.item_id: f.message for f in failures(db_url)}
    assert "task 'price' returned a result that is not JSON-serialisable" in messages["sku:3"]
    assert "task 'price' returned list: a result must be a JSON object" in messages["sku:4"]
    done = {i: r for i, r in results(db_url, ids).items() if i not in messages}
    assert done == {f"sku:{n}": {"n": n} for n in range(COUNT) if n not in (3, 4)}


def test_a_plain_def_task_runs_in_a_thread_and_can_read(db_url: str) -> None:
    app = trawl.App()
    main = threading.get_ident()

    @app.task(tags=["product"])
    def price(ctx: trawl.Context) -> dict[str, Any]:
        other = ctx.get_item_sync("sku:0")
        assert other is not None
        return {"in_thread": threading.get_ident() != main, "first": other.data["n"]}

    ids = products(db_url, 5)
    run(app, db_url)
    assert list(results(db_url, ids).values()) == [{"in_thread": True, "first": 0}] * 5


def test_a_task_that_runs_past_its_timeout_is_recorded_as_failed(db_url: str) -> None:
    app = trawl.App()

    @app.task(tags=["product"], timeout="0.3s", retries=0)
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        if ctx.id == "sku:1":
            await asyncio.sleep(30)
        return {"ok": True}

    ids = products(db_url, 4)
    started = time.monotonic()
    run(app, db_url)
    assert time.monotonic() - started < 10
    [failure] = failures(db_url)
    assert (failure.item_id, failure.error_type) == ("sku:1", "TaskTimeout")
    assert "task 'price' exceeded its timeout of 0.3s" in failure.message
    ran = float(failure.message.rsplit("(ran ", 1)[1].rstrip("s)"))
    assert 0.3 <= ran < 1.0, failure.message  # stopped soon after its deadline, not before
    assert sorted(i for i, r in results(db_url, ids).items() if r == {"ok": True}) == [
        "sku:0",
        "sku:2",
        "sku:3",
    ]


def test_a_task_that_swallows_its_cancellation_is_abandoned_at_its_timeout(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An async task that catches CancelledError and carries on cannot be stopped: soon
    after its timeout the worker stops waiting for it, records the timeout, frees its slot
    and lets its lease go, as it abandons a plain def task's thread; what the task returns
    later is never committed. Plugins see its tick end with the timeout, as for any."""
    ticks = _Ticks()
    app = trawl.App(plugins=[ticks])
    ended: list[float] = []

    @app.task(tags=["product"], timeout="0.3s", retries=0)
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        if ctx.id == "sku:1":
            await _stubborn(ended)
        return {"ok": True}

    ids = products(db_url, 4)
    monkeypatch.setattr(worker_module, "CANCEL_GRACE", 0.5)
    run(app, db_url)  # asyncio.run's own shutdown still waits for the task to end
    [failure] = failures(db_url)
    assert (failure.item_id, failure.error_type) == ("sku:1", "TaskTimeout")
    assert "did not stop when cancelled" in failure.message
    [end] = ended
    assert failure.occurred_at < end, "the failure was recorded only once the task ended"
    assert results(db_url, ids) == {
        "sku:0": {"ok": True},
        "sku:1": None,
        "sku:2": {"ok": True},
        "sku:3": {"ok": True},
    }
    assert ticks.seen["sku:1"] == ["start", "exception TaskTimeout", "end failure"]
    assert ticks.seen["sku:0"] == ["start", "end success"]


class _Ticks:
    """The tick hooks a worker fires, per item."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}

    @trawl.hookimpl
    def trawl_actor_tick_start(self, job: Any) -> None:
        self.seen.setdefault(job.item_id, []).append("start")

    @trawl.hookimpl
    def trawl_actor_tick_exception(self, job: Any, exception: BaseException) -> None:
        self.seen[job.item_id].append(f"exception {type(exception).__name__}")

    @trawl.hookimpl
    def trawl_actor_tick_end(self, job: Any, result: Any) -> None:
        self.seen[job.item_id].append(f"end {result.outcome}")


async def _stubborn(ended: list[float]) -> None:
    """Up to 3 s, catching every cancellation; then notes when it ended."""
    for _ in range(6):
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.5)
    ended.append(time.time())


def test_as_many_abandoned_attempts_as_slots_stop_the_worker_to_be_started_afresh(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each abandoned attempt goes on unseen, and only the process's end stops it: once as
    many run as the worker has slots, it stops claiming and exits with status 3 (what an
    actor exits with to be replaced). Fewer leave it running."""
    app = trawl.App()
    ended: list[float] = []

    @app.task(tags=["product"], timeout="0.3s", retries=0)
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        if ctx.id in ("sku:0", "sku:1"):
            await _stubborn(ended)
        return {"ok": True}

    products(db_url, 2)
    monkeypatch.setattr(worker_module, "CANCEL_GRACE", 0.3)
    worker = Worker(app, url=db_url, concurrency=2, exit_when_idle=True, grace=5)
    with caplog.at_level(logging.ERROR, logger="trawl.worker"):
        assert process_loop.run(worker.run(), grace=0.1) == EXIT_REPLACE == 3
    assert "2 abandoned attempts are still running" in caplog.text
    assert {f.item_id for f in failures(db_url)} == {"sku:0", "sku:1"}

    add(db_url, *(item(f"sku:{n}", "product") for n in range(2, 5)))
    worker = Worker(app, url=db_url, concurrency=8, exit_when_idle=True, grace=5)
    assert process_loop.run(worker.run(), grace=0.1) == 0  # no abandoned attempt left


def test_plain_def_tasks_stuck_past_their_timeout_count_as_abandoned_too(db_url: str) -> None:
    """A thread cannot be stopped: past its timeout the attempt fails and its thread runs on.
    As many such threads as slots stop the worker with status 3, as abandoned async tasks do."""
    app = trawl.App()
    release = threading.Event()

    @app.task(tags=["product"], timeout="0.3s", retries=0)
    def price(ctx: trawl.Context) -> None:
        release.wait(30)  # stuck, like a blocking call without a timeout

    products(db_url, 2)
    worker = Worker(app, url=db_url, concurrency=2, exit_when_idle=True, grace=5)
    try:
        assert process_loop.run(worker.run(), grace=0.1) == EXIT_REPLACE
        assert attempt_module.stuck_threads() == 2
        assert {f.error_type for f in failures(db_url)} == {"TaskTimeout"}
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while attempt_module.stuck_threads():
        assert time.monotonic() < deadline, "the released threads never ended"
        time.sleep(0.05)


def test_a_stopping_worker_does_not_wait_for_a_task_that_swallows_its_cancellation(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the grace period the worker cancels what still runs and releases its jobs; a
    task that goes on regardless is left behind, its job released (due again), not held
    until the task ends."""
    app = trawl.App()
    ended: list[float] = []

    @app.task(tags=["product"], timeout="1h")
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        await _stubborn(ended)
        return {"ok": True}

    ids = products(db_url, 1)
    monkeypatch.setattr(worker_module, "CANCEL_GRACE", 0.5)

    async def scenario() -> float:
        worker = Worker(app, url=db_url, concurrency=2, grace=0.2)
        await _stop_once(worker, lambda: worker.stats.running == 1)
        return time.time()

    stopped = asyncio.run(scenario())
    [end] = ended
    assert stopped < end, "the worker waited for the task to end"
    assert results(db_url, ids) == {"sku:0": None}
    with Store(db_url) as store:
        assert {s.task: s.queued for s in store.status()}["price"] == 1


def test_async_tasks_read_items_through_aliases_and_other_tasks_metadata(db_url: str) -> None:
    app = trawl.App()

    @app.task(tags=["product"])
    async def stock(ctx: trawl.Context) -> dict[str, Any]:
        ctx.create_alias(f"ean:{ctx.data['n']}")
        return {"left": ctx.data["n"] * 10}

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        same = await ctx.get_item(f"ean:{ctx.data['n']}")
        stocked = await ctx.get_metadata("stock")
        missing = await ctx.get_metadata("stock", id="sku:nope")
        assert same is not None
        assert stocked is not None
        return {"canonical": same.id, "left": stocked["left"], "missing": missing}

    ids = products(db_url, 6)
    run(app, db_url, tasks=["stock"])
    run(app, db_url, tasks=["price"])
    assert results(db_url, ids) == {
        f"sku:{n}": {"canonical": f"sku:{n}", "left": n * 10, "missing": None} for n in range(6)
    }


def test_a_busy_worker_commits_each_batch_in_the_transaction_of_its_next_claim(
    db_url: str,
) -> None:
    app = trawl.App()

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        return {"n": ctx.data["n"]}

    ids = products(db_url, 64)
    with sql_statements_by_thread() as seen:
        worker = run(app, db_url)
    assert worker.stats.done == 64
    # Each lane (a thread and connection of its own) runs its transactions in turn.
    kinds: dict[str, list[set[str]]] = {}
    for thread, sql in seen:
        statement = " ".join(sql.split()).upper()
        lane = kinds.setdefault(thread, [])
        if statement.startswith("BEGIN"):
            lane.append(set())
        elif lane and "SET STATUS = 'RUNNING'" in statement:
            lane[-1].add("claim")
        elif lane and "RETURNING JOBS.ID, JOBS.ATTEMPT" in statement:
            lane[-1].add("commit")  # the fenced commit (each backend's form)
    batches = [k for lane in kinds.values() for k in lane]
    # 64 jobs, 8 slots: every batch but the last of each lane commits with the next claim.
    lanes = worker.connections
    batch = 8 // lanes
    assert sum(k == {"commit", "claim"} for k in batches) >= 64 // batch - lanes, kinds
    assert sum(k == {"commit"} for k in batches) <= lanes, kinds
    assert list(results(db_url, ids).values()) == [{"n": n} for n in range(64)]


@pytest.mark.parametrize("connections", [1, 2, 3])
def test_lanes_share_the_slots_and_commit_every_job_once(db_url: str, connections: int) -> None:
    app = trawl.App()
    running = 0
    peak = 0

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.002 * (ctx.data["n"] % 5))  # staggered, so lanes overlap
        running -= 1
        return {"n": ctx.data["n"]}

    ids = products(db_url, 300)
    with sql_statements_by_thread() as seen:
        worker = Worker(
            app, url=db_url, concurrency=12, connections=connections, exit_when_idle=True
        )
        assert asyncio.run(worker.run()) == 0
    assert worker.stats.done == 300
    assert 1 < peak <= 12  # the lanes together never run more than the slots
    claimers = {t for t, sql in seen if "SET STATUS = 'RUNNING'" in sql.upper()}
    assert len(claimers) == connections, claimers
    assert list(results(db_url, ids).values()) == [{"n": n} for n in range(300)]
    with Store(db_url) as store:
        done = [e for e in store.journal(limit=10_000) if e.kind == "job.done"]
    assert sorted(e.item_id for e in done) == sorted(ids)  # each committed exactly once


def test_a_lane_whose_sweep_took_a_while_claims_only_what_is_free_after_it(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane looks for lapsed leases before it claims; while that look is at the
    database, the other lane claims. The first must count the slots free after its sweep,
    not before it, or the two lease more jobs than the slots (15 of 12 were seen)."""
    app = trawl.App()
    running = 0
    peak = 0

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05 + 0.005 * (ctx.data["n"] % 7))  # outlasts a sweep
        running -= 1

    real = LocalLane.sweep

    async def slow_sweep(self: LocalLane, defs: Any) -> Any:
        await asyncio.sleep(0.03)
        return await real(self, defs)

    monkeypatch.setattr(LocalLane, "sweep", slow_sweep)
    monkeypatch.setattr(worker_module, "SWEEP_EVERY", 0.01)
    products(db_url, 200)
    worker = Worker(app, url=db_url, concurrency=12, connections=2, exit_when_idle=True)
    assert asyncio.run(worker.run()) == 0
    assert worker.stats.done == 200
    assert 1 < peak <= 12


@pytest.mark.parametrize(("claim_when_free", "least"), [(0.25, 4), (0.5, 8), (1.0, 16)])
def test_a_worker_claims_again_once_its_part_of_the_slots_is_free(
    db_url: str, monkeypatch: pytest.MonkeyPatch, claim_when_free: float, least: int
) -> None:
    """Claims (and the commits that ride with them) come in batches of at least the part
    of the slots the worker waits for, however the attempts' ends are spread."""
    app = trawl.App()

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> None:
        await asyncio.sleep(0.002 * (ctx.data["n"] % 11))  # ends spread out

    limits: list[int] = []
    real = LocalLane.commit_and_claim

    async def call(self: LocalLane, results: Any, limit: int, known: Any) -> Any:
        if limit:
            limits.append(limit)
        return await real(self, results, limit, known)

    monkeypatch.setattr(LocalLane, "commit_and_claim", call)
    products(db_url, 200)
    worker = Worker(
        app, url=db_url, concurrency=16, exit_when_idle=True, claim_when_free=claim_when_free
    )
    assert asyncio.run(worker.run()) == 0
    assert worker.stats.done == 200
    assert limits[0] == 16  # the first claim, with nothing running, fills every slot
    assert min(limits) >= least, limits
    if claim_when_free < 1:
        assert min(limits) < 16, limits  # not every claim waited for all the slots


@pytest.mark.parametrize("value", [0, -0.5, 1.5])
def test_the_part_of_the_slots_a_worker_claims_at_is_above_0_and_at_most_1(
    db_url: str, value: float
) -> None:
    with pytest.raises(ValueError, match=f"claim_when_free must be in \\(0, 1\\], got {value}"):
        Worker(trawl.App(), url=db_url, claim_when_free=value)


def test_a_worker_needs_at_least_one_connection(db_url: str) -> None:
    with pytest.raises(ValueError, match="connections must be at least 1, got 0"):
        Worker(trawl.App(), url=db_url, connections=0)


def test_a_lane_that_fails_stops_the_worker_instead_of_running_on_without_it(
    db_url: str,
) -> None:
    app = trawl.App()

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> None:
        return None

    products(db_url, 4)

    def claim(store: Store, limit: int) -> ClaimBatch:
        if threading.current_thread().name.startswith("trawl-db-lane1"):
            raise RuntimeError("lane 1 broke")
        return ClaimBatch(jobs=[])  # lane 0 alone would poll for ever

    worker = Worker(app, url=db_url, concurrency=4, connections=2, claim=claim, poll=0.05)
    with pytest.raises(RuntimeError, match="lane 1 broke"):
        asyncio.run(asyncio.wait_for(worker.run(), 30))


@pytest.mark.parametrize("connections", [1, 2])
def test_a_claim_whose_answer_was_lost_is_taken_back_not_left_running(
    db_url: str, connections: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database committed a claim but the connection died before its rows came back
    (a server stopped mid-COMMIT): the worker must run those jobs, not leave them leased
    to nobody until the lease lapses."""
    app = trawl.App()

    @app.task(tags=["product"], timeout="1h")
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        return {"n": ctx.data["n"]}

    ids = products(db_url, 40)
    worker = Worker(
        app, url=db_url, concurrency=8, connections=connections, exit_when_idle=True, grace=5
    )
    lost: list[list[str]] = []
    real = LocalLane.commit_and_claim

    async def call(self: LocalLane, *args: Any) -> Any:
        answer = await real(self, *args)
        if answer[1].jobs and len(lost) < 2:
            lost.append([job.item_id for job in answer[1].jobs])
            raise DatabaseUnavailable("server closed the connection before the answer came")
        return answer

    monkeypatch.setattr(LocalLane, "commit_and_claim", call)  # every lane's
    assert asyncio.run(asyncio.wait_for(worker.run(), 60)) == 0
    assert len(lost) == 2
    assert all(lost)
    assert list(results(db_url, ids).values()) == [{"n": n} for n in range(40)]
    with Store(db_url) as store:
        entries = store.journal(limit=10_000)
    assert sorted(e.item_id for e in entries if e.kind == "job.done") == sorted(ids)
    assert [e for e in entries if e.kind in ("job.failed", "job.released")] == []


def _outage_after_first_claim(monkeypatch: pytest.MonkeyPatch, *, at_once: bool = False) -> None:
    """Every claim, commit, sweep and clock check fails once a claim has leased jobs (or
    from the first claim on, *at_once*): a database that went away and stays away."""
    down = at_once
    real_claim = LocalLane.commit_and_claim

    def gone() -> None:
        if down:
            raise DatabaseUnavailable("the database went away")

    async def claim(self: LocalLane, *args: Any) -> Any:
        nonlocal down
        gone()
        answer = await real_claim(self, *args)
        down = bool(answer[1].jobs)
        return answer

    async def fail(*args: Any, **kwargs: Any) -> Any:
        gone()
        raise AssertionError("only reached while the database is up")

    real_sweep = LocalLane.sweep
    monkeypatch.setattr(LocalLane, "commit_and_claim", claim)
    monkeypatch.setattr(LocalLane, "sweep", lambda *a: _after(gone, real_sweep, *a))
    monkeypatch.setattr(LocalBackend, "commit", fail)


async def _after(check: Any, real: Any, *args: Any) -> Any:
    check()
    return await real(*args)


async def _stop_once(worker: Worker, ready: Any) -> int:
    run = asyncio.create_task(worker.run())
    while not ready():  # noqa: ASYNC110 - a log line to wait for, no event
        await asyncio.sleep(0.01)
    worker.stop()
    return await asyncio.wait_for(run, 20)


def test_a_worker_stopped_during_an_outage_with_nothing_to_commit_exits_at_once(
    db_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An actor whose orchestrator died is told to stop; with the database gone too it
    must not retry its claim for ever (it lived on as an orphan)."""
    app = trawl.App()

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> None:
        return None

    _outage_after_first_claim(monkeypatch, at_once=True)
    worker = Worker(app, url=db_url, concurrency=4, grace=60)
    failing = lambda: "failed, retrying" in caplog.text  # noqa: E731
    assert asyncio.run(_stop_once(worker, failing)) == 0  # well before the 60 s grace


def test_a_worker_stopped_during_an_outage_gives_up_its_commits_after_the_grace(
    db_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = trawl.App()

    @app.task(tags=["product"], timeout="1h")
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        return {"n": ctx.data["n"]}

    products(db_url, 4)
    _outage_after_first_claim(monkeypatch)
    worker = Worker(app, url=db_url, concurrency=8, grace=0.5)
    failing = lambda: "failed, retrying" in caplog.text  # noqa: E731
    assert asyncio.run(_stop_once(worker, failing)) == 0
    assert "gave up committing 4 finished attempts after the grace period" in caplog.text
    with Store(db_url) as store:  # nothing was committed: the leases will lapse
        assert {s.task: s.running for s in store.status()}["price"] == 4


def test_exit_when_idle_waits_for_the_retries_it_scheduled(db_url: str) -> None:
    app = trawl.App()

    @app.task(tags=["product"], retries=2, backoff="1s")
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        if ctx.attempt == 1:
            raise RuntimeError("flaky the first time")
        return {"attempt": ctx.attempt}

    ids = products(db_url, 3)
    worker = run(app, db_url)  # nothing is due after the first round: only retries to come
    assert (worker.stats.done, worker.stats.failed) == (3, 3)
    assert results(db_url, ids) == {i: {"attempt": 2} for i in ids}


def test_exit_when_idle_waits_for_the_jobs_it_deferred(db_url: str) -> None:
    # A crawl page whose host is not ready is deferred the same way: a remote pipeline's
    # `trawl worker --crawl --exit-when-idle` left the last pages of a Crawl-delay host
    # queued, its crawl unfinished, in two of five runs of bench/crawl's trawl-remote.
    app = trawl.App()

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> dict[str, Any] | None:
        if ctx.attempt == 1:
            ctx.defer(time.time() + 1.0)
            return None
        return {"attempt": ctx.attempt}

    ids = products(db_url, 3)
    worker = run(app, db_url)  # nothing is due after the first round: only its deferrals
    assert worker.stats.done == 3
    assert results(db_url, ids) == {i: {"attempt": 2} for i in ids}


def test_a_deferred_job_is_claimed_when_it_comes_due_not_at_the_next_poll(db_url: str) -> None:
    # A crawl page put aside for its host's turn is deferred to just before the start kept
    # for it. An empty claim did not say when such a job comes due, so an idle worker
    # (`trawl worker`, a second's poll) looked again only as its waits doubled towards the
    # poll: here, with a 10 s poll, 2.1 s after a deferral of 3 s came due.
    app = trawl.App()
    due: list[float] = []
    begun: list[float] = []

    @app.task(tags=["product"])
    async def price(ctx: trawl.Context) -> dict[str, Any] | None:
        begun.append(time.time())
        if ctx.attempt == 1:
            due.append(time.time() + 3.0)
            ctx.defer(due[0])
            return None
        return {"attempt": ctx.attempt}

    ids = products(db_url, 1)
    worker = Worker(app, url=db_url, concurrency=4, exit_when_idle=True, poll=10.0, grace=5)
    assert asyncio.run(worker.run()) == 0
    assert results(db_url, ids) == {ids[0]: {"attempt": 2}}
    assert 0 <= begun[1] - due[0] < 1.0, f"claimed {begun[1] - due[0]:.2f} s after it came due"


def test_exit_when_idle_does_not_wait_for_a_failure_with_no_retry_left(db_url: str) -> None:
    app = trawl.App()

    @app.task(tags=["product"], retries=0, backoff="1h")
    async def price(ctx: trawl.Context) -> dict[str, Any]:
        raise RuntimeError("always")

    products(db_url, 2)
    worker = run(app, db_url)  # returns (not after an hour: pytest's timeout would end it)
    assert (worker.stats.done, worker.stats.failed) == (0, 2)
