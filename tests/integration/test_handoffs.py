"""Jobs handed to an external executor, on both backends: a message runs its attempt at
most once, stale messages run nothing, claims never recorded as published are taken back,
and one feeder per queue."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery import Celery

from tests.integration.helpers import FakeClock, item
from trawl.engine.claim import TaskGate, claim
from trawl.model.errors import InvalidInput
from trawl.runtime.app import App
from trawl.runtime.feeder import Feeder, FeederTaken, FeedOptions
from trawl.runtime.handoff import STALE, HandoffRunner
from trawl.runtime.settle import sweep_lapsed
from trawl.store.store import Store

PUBLISH = 30.0
QUEUE_LEASE = 600.0


@pytest.fixture
def calls() -> list[tuple[str, int]]:
    return []


@pytest.fixture
def app(db_url: str, calls: list[tuple[str, int]]) -> App:
    app = App(db_url)

    @app.task(tags=["repo"], executor="celery", timeout="30s", retries=2, backoff=0)
    def load(ctx):  # type: ignore[no-untyped-def]
        calls.append((ctx.id, ctx.attempt))
        ctx.create_item(f"found:{ctx.id}", tags=["found"])  # effects commit with the attempt
        ctx.log("load", f"loaded {ctx.data['n']}")
        return {"seen": ctx.id}

    return app


@pytest.fixture
def store(app: App, clock: FakeClock) -> Iterator[Store]:
    with Store(app.db, clock=clock) as opened:
        opened.register_tasks(d.info() for d in app.tasks.values())
        opened.add_items([item(f"repo:{n}", "repo", n=n) for n in range(3)])
        yield opened


def hand_off(store: Store, *, record: bool = True) -> list[tuple[int, int]]:
    """What a feeder does: claim, mark claimed, (publish,) record as queued."""
    with store.unit():
        jobs = claim(store, [TaskGate(name="load", timeout=PUBLISH)], 10, "feeder").jobs
        store.handoffs.mark_claimed([j.job_id for j in jobs])
    pairs = [(j.job_id, j.attempt) for j in jobs]
    if record:
        with store.write():
            assert store.handoffs.record_queued(pairs, store.clock() + QUEUE_LEASE) == 3
    return pairs


def journal_done(store: Store) -> list[str]:
    return [e.item_id or "" for e in store.journal() if e.kind == "job.done"]


def test_a_message_delivered_twice_runs_and_commits_once(
    app: App, store: Store, calls: list[tuple[str, int]]
) -> None:
    pairs = hand_off(store)
    runner = HandoffRunner(app, "celery")
    try:
        assert [runner.run("load", j, a) for j, a in pairs] == ["success"] * 3
        assert [runner.run("load", j, a) for j, a in pairs] == [STALE] * 3
    finally:
        runner.close()
    assert sorted(calls) == [(f"repo:{n}", 1) for n in range(3)]
    assert sorted(journal_done(store)) == [f"repo:{n}" for n in range(3)]
    logs = [e.detail for e in store.journal() if e.kind == "log"]
    assert len(logs) == 3, logs
    assert all("loaded" in str(d) for d in logs), logs
    assert all(store.get_item(f"found:repo:{n}") is not None for n in range(3))


def test_a_message_that_outlived_its_attempt_runs_nothing(
    app: App, store: Store, clock: FakeClock, calls: list[tuple[str, int]]
) -> None:
    pairs = hand_off(store)
    clock.advance(QUEUE_LEASE + 1)  # the messages waited past the queue lease: lost
    _, report = sweep_lapsed(store, {"load": app.get("load")})
    assert len(report.committed) == 3
    again = hand_off(store)  # retried as attempt 2
    runner = HandoffRunner(app, "celery")
    try:
        assert [runner.run("load", j, a) for j, a in pairs] == [STALE] * 3
        assert calls == []
        assert [runner.run("load", j, a) for j, a in again] == ["success"] * 3
    finally:
        runner.close()
    assert {a for _, a in calls} == {2}


def test_claims_never_recorded_are_taken_back_once_their_lease_lapses(
    store: Store, clock: FakeClock
) -> None:
    pairs = hand_off(store, record=False)  # the feeder died between its claim and record
    with store.write():
        assert store.handoffs.unpublished(["load"], "feeder2", PUBLISH, clock.now, 10) == []
    clock.advance(PUBLISH + 1)
    with store.write():
        taken = store.handoffs.unpublished(["load"], "feeder2", PUBLISH, clock.now, 10)
        # taken over: not handed out twice
        assert store.handoffs.unpublished(["load"], "feeder3", PUBLISH, clock.now, 10) == []
    assert sorted((t.job_id, t.attempt) for t in taken) == sorted(pairs)  # the same attempts
    with store.read():
        assert store.handoffs.outstanding(["load"]) == 3
    tasks, _ = store.executors()
    assert [(t.task, t.claimed, t.queued, t.started) for t in tasks] == [("load", 3, 0, 0)]


def test_status_counts_jobs_in_the_broker_and_running(app: App, store: Store) -> None:
    pairs = hand_off(store)
    with store.write():
        assert store.handoffs.start(pairs[0][0], pairs[0][1], "celery:w", 30.0, 0) is not None
    tasks, _ = store.executors()
    assert [(t.task, t.executor, t.queue, t.queued, t.started) for t in tasks] == [
        ("load", "celery", "trawl.load", 2, 1)
    ]


def test_one_feeder_per_queue(app: App, store: Store) -> None:
    celery_app = Celery("test", broker="memory://")  # never connected: no queue is read
    from trawl.celery import bind
    from trawl.celery.broker import CeleryBroker

    bind(app, celery_app)
    first = Feeder(app, CeleryBroker(celery_app), FeedOptions(cap=10))
    second = Feeder(app, CeleryBroker(celery_app), FeedOptions(cap=10))
    first.prepare(store)
    with pytest.raises(FeederTaken, match=r"queue trawl.load is fed by feed:.*stop the other"):
        second.prepare(store)
    first.release(store)  # a feeder that stops hands the queue over
    second.prepare(store)


def test_a_feeder_refuses_tasks_it_does_not_feed(app: App) -> None:
    @app.task(tags=["repo"])
    def local(ctx):  # type: ignore[no-untyped-def]
        return None

    celery_app = Celery("test", broker="memory://")
    from trawl.celery.broker import CeleryBroker

    with pytest.raises(InvalidInput, match="has executor='local', not 'celery'"):
        Feeder(app, CeleryBroker(celery_app), FeedOptions(cap=10), tasks=["local"])


def test_an_idle_feeder_knows_when_the_next_job_comes_due(store: Store, clock: FakeClock) -> None:
    hand_off(store)  # every job is in the broker: nothing due now
    with store.read():
        assert store.handoffs.next_due(["load"]) == clock.now + QUEUE_LEASE  # a lease lapses
    with store.read():
        assert store.handoffs.next_due(["other"]) is None


def test_a_feeder_waits_out_a_broker_it_cannot_reach(
    app: App, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    from trawl.celery import bind
    from trawl.celery.broker import CeleryBroker

    celery_app = Celery("test", broker="amqp://guest:guest@127.0.0.1:9//")  # nothing listens
    celery_app.conf.broker_connection_timeout = 1
    bind(app, celery_app)
    broker = CeleryBroker(celery_app)
    feeder = Feeder(app, broker, FeedOptions(cap=10, retry_wait=7.0))
    feeder.prepare(store)
    assert feeder._cycle_safely(store, "trawl.load") == 7.0  # tries again later
    assert "feeding trawl.load failed, retrying in 7s" in caplog.text
    assert broker._connection is None  # the next try opens a new connection
    with store.read():
        assert store.handoffs.outstanding(["load"]) == 0  # nothing was claimed
