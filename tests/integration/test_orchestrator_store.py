"""What the orchestrator reads and writes, on both backends: capped queue depths, key
samples, orphans, a keyed claim, settling the jobs of a dead actor, and settling them again
once its database session has gone."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator
from functools import partial

import psycopg
import pytest
import sqlalchemy as sa

import trawl
from tests.integration.conftest import FakeClock
from tests.integration.helpers import LEASE, claim, item, job_of, reclaim, success, task
from tests.support.procs import wait_for
from trawl.engine.commit import commit
from trawl.engine.keyed import claim_keyed
from trawl.runtime import orchestrator
from trawl.runtime.actor.handle import ActorHandle
from trawl.runtime.actor.spec import ActorInfo, ActorType, actor_key
from trawl.runtime.orchestrator import Orchestrator
from trawl.runtime.settle import Death, held_jobs, settle
from trawl.store.sql import q
from trawl.store.store import Store


def _setup(store: Store, count: int, *tasks: str) -> list[str]:
    """Items in a fixed claim order (niceness), persona bob for every third, else alice."""
    store.register_tasks([task(name, ("product",)) for name in tasks or ("price",)])
    ids = [f"sku:{n:03d}" for n in range(count)]
    persona = ("bob", "alice", "alice")
    store.add_items(
        [item(i, "product", niceness=n, persona=persona[n % 3]) for n, i in enumerate(ids)]
    )
    return ids


def test_queue_depths_are_due_jobs_per_task_capped(store: Store, clock: FakeClock) -> None:
    _setup(store, 30, "price", "stock")
    assert store.queues.due_counts(["price", "stock", "none"], clock(), 100) == {
        "price": 30,
        "stock": 30,
        "none": 0,
    }
    assert store.queues.due_counts(["price"], clock(), 10) == {"price": 10}
    claimed = claim(store, "price", limit=12)
    commit(store, [success(j) for j in claimed[:5]])
    assert store.queues.due_counts(["price"], clock(), 100) == {"price": 18}
    clock.advance(LEASE + 1)  # the 7 leases still held lapse: claimable again, not promoted
    assert store.queues.due_counts(["price"], clock(), 100) == {"price": 25}
    assert store.queues.due_counts(["price"], clock(), 20) == {"price": 20}


def test_orphans_are_tasks_left_out_with_due_jobs(store: Store, clock: FakeClock) -> None:
    _setup(store, 4, "price", "stock", "gone")
    commit(store, [success(j) for j in claim(store, "stock")])
    assert store.queues.orphans(["price"], clock(), 100) == {"gone": 4}
    assert store.queues.orphans(["price", "gone"], clock(), 100) == {}


def test_a_sample_of_due_jobs_gives_launch_keys_in_claim_order(
    store: Store, clock: FakeClock
) -> None:
    ids = _setup(store, 9)
    sample = store.queues.due_sample("price", clock(), 100)
    assert [i for i, _ in sample] == ids
    key = partial(actor_key, lambda it: it.data["persona"])
    assert [key(i, d) for i, d in sample[:4]] == ["bob", "alice", "alice", "bob"]
    assert actor_key(lambda it: it.data["missing"], "sku:x", {}) == "<error>"


def test_a_keyed_claim_leases_only_its_key(store: Store) -> None:
    ids = _setup(store, 9)
    key_of = partial(actor_key, lambda it: it.data["persona"])
    take = partial(claim_keyed, store, task="price", timeout=LEASE, key_of=key_of)
    bobs = take(key="bob", limit=2, owner="bob-actor").jobs
    assert sorted(j.item_id for j in bobs) == ["sku:000", "sku:003"]  # the best two of bob's
    alices = take(key="alice", limit=100, owner="alice-actor").jobs
    assert sorted(j.item_id for j in alices) == [i for n, i in enumerate(ids) if n % 3]
    assert [j.item_id for j in take(key="bob", limit=100, owner="bob-actor").jobs] == ["sku:006"]
    assert take(key="carol", limit=100, owner="carol-actor").jobs == []
    store.pause_task("price")
    store.add_items([item("sku:new", "product", niceness=-1, persona="bob")])
    assert take(key="bob", limit=100, owner="bob-actor").jobs == []


def _price_task(retries: int = 3) -> trawl.TaskDef:
    app = trawl.App()
    app.task(name="price", tags=["product"], retries=retries, backoff="10s")(lambda ctx: None)
    return app.tasks["price"]


@pytest.mark.parametrize(
    ("death", "status", "error"),
    [
        (Death.CRASHED, "failed", "ActorDied"),
        (Death.STALLED, "failed", "TaskTimeout"),
        (Death.STOPPED, "queued", None),
        (Death.CLEAN, "queued", None),
    ],
)
def test_a_dead_actors_jobs_are_settled_at_once(
    store: Store, clock: FakeClock, death: Death, status: str, error: str | None
) -> None:
    _setup(store, 3)
    mine = claim(store, limit=2, owner="dead")
    other = claim(store, limit=1, owner="alive")
    commit(store, [success(mine[1])])  # committed just before it died

    held = held_jobs(store, "price", "dead")
    assert [j.item_id for j in held] == [mine[0].item_id]
    _, report = settle(store, _price_task(), held, death, "it died")
    assert (report.committed, report.stale) == ([mine[0].job_id], [])
    view = job_of(store, mine[0].item_id)
    assert (view.status, view.owner) == (status, None)
    failures = store.failures(item_id=mine[0].item_id)
    assert [(f.error_type, f.message) for f in failures] == ([(error, "it died")] if error else [])
    due = view.due_at
    assert due is not None
    if death is Death.STALLED:
        assert clock() + 5 <= due <= clock() + 10  # the retry policy's backoff
    else:
        assert due == clock()  # at once
    assert job_of(store, other[0].item_id).status == "running"  # another actor's lease


def test_a_crashed_actors_job_without_retries_left_is_not_run_again(store: Store) -> None:
    _setup(store, 1)
    held = claim(store, owner="dead")
    settle(store, _price_task(retries=0), held_jobs(store, "price", "dead"), Death.CRASHED, "x")
    assert job_of(store, held[0].item_id).due_at is None


def test_settling_an_attempt_that_was_already_reclaimed_changes_nothing(
    store: Store, clock: FakeClock
) -> None:
    _setup(store, 1)
    claim(store, owner="dead")
    held = held_jobs(store, "price", "dead")
    clock.advance(LEASE + 1)
    again = reclaim(store, owner="alive")
    _, report = settle(store, _price_task(), held, Death.CRASHED, "late")
    assert report.stale == [again.job_id]
    view = job_of(store, again.item_id)
    assert (view.status, view.attempt, view.owner) == ("running", 2, "alive")


def _dsn(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def test_open_sessions_are_told_by_their_application_name(db_url: str, store: Store) -> None:
    if store.is_sqlite:  # a dead process holds nothing there: nothing to wait for
        assert store.queues.connected(["trawl actor abc"]) == set()
        return
    with psycopg.connect(_dsn(db_url), application_name="trawl actor abc"):
        assert store.queues.connected(["trawl actor abc", "trawl actor def"]) == {"trawl actor abc"}
    wait_for(lambda: not store.queues.connected(["trawl actor abc"]), "the session to end")
    assert store.queues.connected([]) == set()


@pytest.mark.postgres
def test_sessions_are_named_by_pgappname_unless_the_url_names_them(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def name(url: str) -> str:
        with Store(url) as store, store.db.read():
            return str(store.db.execute(q("SHOW application_name")).scalar())

    monkeypatch.delenv("PGAPPNAME", raising=False)
    assert name(pg_url) == "trawl"
    monkeypatch.setenv("PGAPPNAME", SESSION)  # as the orchestrator starts an actor
    assert name(pg_url) == SESSION
    assert name(f"{pg_url}?application_name=mine") == "mine"


@pytest.fixture
def lingering(pg_url: str) -> Iterator[tuple[Store, psycopg.Connection[object]]]:
    """A PostgreSQL store, and the session of an actor killed while its COMMIT ran."""
    with Store(pg_url) as store, psycopg.connect(_dsn(pg_url), application_name=SESSION) as conn:
        yield store, conn


SESSION = "trawl actor 0dead0"


def _orchestrator(url: str) -> Orchestrator:
    """An orchestrator that has just reaped one crashed actor, owner "dead"."""
    app = trawl.App()
    app.task(name="price", tags=["product"], retries=3)(lambda ctx: None)
    popen = subprocess.Popen(["true"])
    popen.wait()
    info = ActorInfo(type="price", key=None, pid=popen.pid, owner="dead", tasks=("price",))
    kind = ActorType(name="price", timeout=60.0, niceness=0)
    child = ActorHandle(info=info, type=kind, popen=popen, beat_fd=-1, session=SESSION)
    found = Orchestrator(app, app_spec="app.py:app", url=url)
    found._unsettled.append((child, Death.CRASHED, "it died"))
    return found


@pytest.mark.postgres
def test_a_claim_that_lands_after_its_actor_died_is_settled_once_the_session_has_gone(
    pg_url: str, lingering: tuple[Store, psycopg.Connection[object]]
) -> None:
    store, conn = lingering
    _setup(store, 3)
    orch = _orchestrator(pg_url)
    orch._settle_dead(store)  # nothing held yet: the claim's COMMIT is still running
    late = claim(store, limit=2, owner="dead")  # ... and now it has landed
    orch._settle_dead(store)
    assert [job_of(store, j.item_id).status for j in late] == ["running", "running"]
    assert orch._mourning, "the dead actor's session is open: it is still mourned"

    conn.close()
    wait_for(lambda: not store.queues.connected([SESSION]), "the session to end")
    orch._settle_dead(store)
    assert [job_of(store, j.item_id).status for j in late] == ["failed", "failed"]
    assert [f.error_type for f in store.failures(item_id=late[0].item_id)] == ["ActorDied"]
    assert not orch._mourning


@pytest.mark.postgres
def test_a_session_that_outlives_its_actor_too_long_is_given_up_with_a_warning(
    pg_url: str,
    lingering: tuple[Store, psycopg.Connection[object]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, _ = lingering
    _setup(store, 1)
    orch = _orchestrator(pg_url)
    orch._settle_dead(store)
    late = claim(store, owner="dead")
    monkeypatch.setattr(orchestrator, "MOURN_LIMIT", 0.0)
    with caplog.at_level(logging.WARNING, "trawl.orchestrator"):
        orch._settle_dead(store)
    assert "its database session is still open" in caplog.text
    assert job_of(store, late[0].item_id).status == "failed"  # settled all the same
    assert not orch._mourning


def test_on_sqlite_a_dead_actor_is_settled_once_and_not_mourned(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store.is_sqlite:
        pytest.skip("PostgreSQL waits for the session: the tests above")
    _setup(store, 2)
    mine = claim(store, owner="dead")
    orch = _orchestrator("sqlite:///unused.db")

    def asked(sessions: list[str]) -> set[str]:
        raise AssertionError(f"sessions {sessions} looked up on SQLite")

    monkeypatch.setattr(store.queues, "connected", asked)
    orch._settle_dead(store)
    assert {job_of(store, j.item_id).status for j in mine} == {"failed"}
    assert not orch._mourning
