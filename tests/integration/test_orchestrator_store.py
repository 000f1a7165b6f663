"""What the orchestrator reads and writes, on both backends: capped queue depths, key
samples, orphans, a keyed claim, and settling the jobs of a dead actor."""

from __future__ import annotations

from functools import partial

import pytest

import trawl
from tests.integration.conftest import FakeClock
from tests.integration.helpers import LEASE, claim, item, job_of, reclaim, success, task
from trawl.engine.commit import commit
from trawl.engine.keyed import claim_keyed
from trawl.runtime.actor.spec import actor_key
from trawl.runtime.settle import Death, held_jobs, settle
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
