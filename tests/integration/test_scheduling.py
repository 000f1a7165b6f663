"""Freshness and scheduling on both backends: rate limits, dependencies, failure stops,
pauses, not-found cooldowns and visit policies, with a clock the test moves by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest
from msgspec import structs

from tests.integration.helpers import (
    FakeClock,
    commit_one,
    failure,
    item,
    job_of,
    success,
    task,
)
from trawl.engine.claim import ClaimBatch, TaskGate, claim
from trawl.model.errors import UnknownTask
from trawl.model.limits import make_limit
from trawl.model.records import ClaimedJob
from trawl.store.store import Store

LEASE = 60.0


def gate(name: str = "price", **options: object) -> TaskGate:
    return TaskGate(name=name, timeout=LEASE, **options)  # type: ignore[arg-type]


def take(store: Store, *tasks: TaskGate, limit: int = 100) -> ClaimBatch:
    return claim(store, list(tasks) or [gate()], limit, "w1")


def finish(store: Store, jobs: list[ClaimedJob], **result: object) -> None:
    for job in jobs:
        commit_one(store, success(job, dict(result) or {"ok": True}))


def seed(store: Store, count: int, *, prefix: str = "sku", **data: object) -> None:
    store.add_items([item(f"{prefix}:{n}", "product", **data) for n in range(count)])


# -- rate limits ----------------------------------------------------------------------------


def test_a_limit_grants_one_permit_per_interval_and_defers_the_rest(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    seed(store, 5)
    limited = gate(limits=(make_limit("site", "1/s"),))
    first = take(store, limited)
    assert len(first.jobs) == 1
    assert first.wake_at == pytest.approx(clock.now + 1.0)
    deferred = sorted(
        job_of(store, f"sku:{n}").due_at or 0
        for n in range(5)
        if f"sku:{n}" != first.jobs[0].item_id
    )
    # the backlog steps aside into the key's next free slots, one interval apart
    assert deferred == pytest.approx([clock.now + k for k in (1.0, 2.0, 3.0, 4.0)])
    assert take(store, limited).jobs == []
    clock.advance(1.0)
    assert len(take(store, limited).jobs) == 1


def test_each_key_gets_the_full_rate_and_a_throttled_key_blocks_no_other(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    store.add_items([item(f"sku:busy{n}", "product", host="busy") for n in range(50)])
    store.add_items([item(f"sku:free{n}", "product", host="free") for n in range(3)])
    per_host = make_limit("host", "1/s", key=lambda i: i.data["host"])
    batch = take(store, gate(limits=(per_host,)), limit=10)
    hosts = sorted(j.data["host"] for j in batch.jobs)
    assert hosts == ["busy", "free"]
    clock.advance(1.0)
    assert sorted(j.data["host"] for j in take(store, gate(limits=(per_host,))).jobs) == [
        "busy",
        "free",
    ]


def test_999_throttled_keys_do_not_slow_the_free_one(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task()])
    store.add_items([item(f"sku:k{n}", "product", host=f"h{n}") for n in range(999)])
    store.add_items([item(f"sku:free{n}", "product", host="free") for n in range(5)])
    per_host = make_limit("host", "1/s", burst=5, key=lambda i: i.data["host"])
    # every other key used its burst a moment ago
    with store.db.write():
        store.gates.save_limit_states({("host", f"h{n}"): clock.now + 5.0 for n in range(999)})
    batch = take(store, gate(limits=(per_host,)), limit=5)
    assert sorted(j.item_id for j in batch.jobs) == [f"sku:free{n}" for n in range(5)]
    waiting = store.limits()  # registered limits only; the deferrals are on the jobs
    assert waiting == []
    parked = [job_of(store, f"sku:k{n}") for n in range(0, 999, 111)]
    assert all(j.due_at is not None and j.due_at > clock.now for j in parked)


def test_a_job_needs_a_permit_from_every_limit_it_is_under(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task()])
    seed(store, 4, host="a")
    loose = make_limit("loose", "100/s")
    tight = make_limit("tight", "1/s")
    assert len(take(store, gate(limits=(loose, tight))).jobs) == 1
    clock.advance(0.5)
    assert take(store, gate(limits=(loose, tight))).jobs == []


def test_limits_are_shown_with_their_state(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task()])
    seed(store, 3, host="a")
    per_host = make_limit("host", "1/s", key=lambda i: i.data["host"])
    store.register_limits([per_host])
    take(store, gate(limits=(per_host,)))
    [row] = store.limits()
    assert (row.name, row.rate, row.keyed, row.keys, row.waiting) == ("host", 1.0, True, 1, 2)
    assert row.throttled == 1


# -- dependencies ---------------------------------------------------------------------------


def two_tasks(store: Store) -> None:
    store.register_tasks(
        [task("fetch"), replace(task("parse"), depends_on=("fetch",), rerun_on_change=True)]
    )


def test_a_task_waits_for_its_dependencys_valid_result(store: Store, clock: FakeClock) -> None:
    two_tasks(store)
    seed(store, 1)
    parse = gate("parse", depends_on=("fetch",))
    assert take(store, parse).jobs == []
    parked = job_of(store, "sku:0", "parse")
    assert parked.due_at is None  # parked, not re-read by every claim
    [fetched] = take(store, gate("fetch")).jobs
    finish(store, [fetched])
    assert job_of(store, "sku:0", "parse").due_at == clock.now  # woken by the commit
    assert len(take(store, parse).jobs) == 1


def test_an_expired_or_old_version_dependency_result_is_not_valid(
    store: Store, clock: FakeClock
) -> None:
    two_tasks(store)
    seed(store, 1)
    [fetched] = take(store, gate("fetch")).jobs
    commit_one(store, success(fetched, {"v": 1}, ttl=10.0))
    clock.advance(11.0)
    assert take(store, gate("parse", depends_on=("fetch",))).jobs == []
    store.register_tasks([task("fetch", version="2")])
    [again] = take(store, gate("fetch")).jobs
    commit_one(store, success(again, {"v": 1}, version="1"))  # made by old code
    assert take(store, gate("parse", depends_on=("fetch",))).jobs == []


def test_a_changed_dependency_result_makes_dependents_due_again(
    store: Store, clock: FakeClock
) -> None:
    two_tasks(store)
    seed(store, 1)
    finish(store, take(store, gate("fetch")).jobs)
    finish(store, take(store, gate("parse", depends_on=("fetch",))).jobs)
    assert job_of(store, "sku:0", "parse").due_at is None  # done, no TTL
    store.expire("fetch")
    [fetched] = take(store, gate("fetch")).jobs
    commit_one(store, structs.replace(success(fetched, {"v": 2}), changed=False))
    assert job_of(store, "sku:0", "parse").due_at is None  # same result: nothing to redo
    store.expire("fetch")
    [fetched] = take(store, gate("fetch")).jobs
    commit_one(store, structs.replace(success(fetched, {"v": 3}), changed=True))
    assert job_of(store, "sku:0", "parse").due_at == clock.now


# -- failure stops and pauses ---------------------------------------------------------------


def test_max_failures_pauses_the_task_until_handled_and_resumed(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([replace(task(), max_failures=2)])
    seed(store, 4)
    jobs = take(store, gate(), limit=2).jobs
    for job in jobs:
        commit_one(store, failure(job))
    [counts] = store.status()
    assert counts.paused is not None
    assert "max_failures=2" in counts.paused
    clock.advance(3600)
    assert take(store, gate()).jobs == []  # no worker claims a paused task
    store.handle_failures(task="price")
    assert store.pause_task("price", paused=False)
    assert len(take(store, gate()).jobs) == 4


def test_allowed_failures_do_not_count_towards_the_stop(store: Store, clock: FakeClock) -> None:
    store.register_tasks([replace(task(), max_failures=1)])
    seed(store, 1)
    [job] = take(store, gate()).jobs
    commit_one(store, failure(job, allow=True))
    assert store.status()[0].paused is None


def test_pause_and_resume_by_hand(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task()])
    seed(store, 1)
    assert store.pause_task("price", reason="site down")
    assert not store.pause_task("price")
    assert store.status()[0].paused == "site down"
    assert take(store, gate()).jobs == []
    assert store.pause_task("price", paused=False)
    assert len(take(store, gate()).jobs) == 1
    with pytest.raises(UnknownTask):
        store.pause_task("nope")


# -- not found, cooldowns, listers ----------------------------------------------------------


def not_found(job: ClaimedJob, delay: float | None) -> object:
    return structs.replace(failure(job, "gone"), not_found=True, retry_delay=delay)


def test_not_found_waits_its_cooldown_and_disables_until_relisted(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    seed(store, 1)
    [job] = take(store, gate()).jobs
    commit_one(store, not_found(job, 31 * 86400.0))  # type: ignore[arg-type]
    assert job_of(store, "sku:0").due_at == pytest.approx(clock.now + 31 * 86400.0)
    clock.advance(31 * 86400.0)
    [job] = take(store, gate()).jobs
    assert job.not_found == 1
    commit_one(store, not_found(job, None))  # type: ignore[arg-type]
    assert job_of(store, "sku:0").due_at is None  # disabled
    assert store.add_items([item("sku:0", "product")]) == []  # listed again by hand
    assert job_of(store, "sku:0").due_at == clock.now


# -- visit policy ---------------------------------------------------------------------------


def test_visit_policy_shares_a_batch_between_new_lagging_and_oldest(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    for n in range(6):  # items the source updated at different times
        store.add_items([item(f"old:{n}", "product")])
    finish(store, take(store, gate()).jobs)
    with store.write():
        for n in range(6):  # as a lister reports it
            store.relist(f"old:{n}", clock.now, last_update=clock.now + 100 * n)
    store.expire("price")
    clock.advance(1000)
    store.add_items([item(f"new:{n}", "product") for n in range(6)])
    batch = take(store, gate(weights=(40.0, 40.0, 20.0)), limit=5)
    ids = [j.item_id for j in batch.jobs]
    assert sum(i.startswith("new:") for i in ids) == 2
    lagging = [i for i in ids if i.startswith("old:")]
    assert {"old:5", "old:4"} <= set(lagging)  # the source changed most after our visit
