"""The storage contract: the same behaviour on SQLite and PostgreSQL (``store`` runs on both).

Time is a fake clock, so leases, TTLs and backoff are exact without sleeping.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from tests.integration.helpers import (
    BACKOFF,
    LEASE,
    FakeClock,
    claim,
    claim_one,
    claimed_ids,
    commit_one,
    data_of,
    due_at,
    failure,
    item,
    job_of,
    journal_kinds,
    last_seq,
    reclaim,
    sql_statements,
    success,
    task,
)
from trawl.engine.commit import commit
from trawl.model import effects as fx
from trawl.model.errors import (
    DatabaseUnavailable,
    DataRejected,
    InvalidItemId,
    ItemNotFound,
    UnknownTask,
)
from trawl.model.ids import MAX_ID_LENGTH, check_id
from trawl.model.states import JobStatus
from trawl.store.store import Store


def products(store: Store, *ids: str) -> None:
    store.add_items([item(i, "product") for i in ids])


def set_tag(store: Store, item_id: str, tag: str, *, present: bool) -> None:
    """Add or remove a tag the way a committed effect does."""
    with store.db.write():
        if present:
            store.items.add_tag(item_id, tag, None, now=store.clock())
        else:
            store.items.remove_tag(item_id, tag, now=store.clock(), task=None)


def run_to_done(
    store: Store, *ids: str, result: dict[str, Any] | None = None, ttl: float | None = None
) -> None:
    """Claim the due price jobs, which must be those of *ids*, and commit them as done."""
    jobs = claim(store)
    assert sorted(claimed_ids(jobs)) == sorted(ids)
    commit(store, [success(j, result or {"ok": True}, ttl=ttl) for j in jobs])


# -- items, aliases, tags ---------------------------------------------------------------------


def test_added_item_reads_back_with_data_tags_and_its_own_id_as_alias(
    store: Store, clock: FakeClock
) -> None:
    assert store.add_items([item("sku:1", "product", "sale", title="Mug")]) == ["sku:1"]
    view = store.get_item("sku:1")
    assert view is not None
    assert (view.id, view.data, view.aliases) == ("sku:1", {"title": "Mug"}, ("sku:1",))
    assert view.tags == {"product": None, "sale": None}
    assert view.created_at == view.updated_at == clock.now


def test_adding_an_existing_id_changes_nothing(store: Store) -> None:
    store.add_items([item("sku:1", title="first")])
    assert store.add_items([item("sku:1", title="second"), item("sku:2")]) == ["sku:2"]
    view = store.get_item("sku:1")
    assert view is not None
    assert view.data == {"title": "first"}


def test_items_added_together_are_created_and_journaled_in_the_order_given(
    store: Store,
) -> None:
    seq = last_seq(store)
    ids = ["sku:3", "sku:1", "sku:2"]
    added = store.add_items([item("sku:3", n=1), item("sku:1"), item("sku:3", n=2), item("sku:2")])
    assert added == ids  # of duplicate ids, the first wins
    assert [e.item_id for e in store.journal(seq)] == ids
    assert data_of(store, "sku:3") == {"n": 1}


def test_a_tag_named_twice_on_one_new_item_keeps_the_first(store: Store) -> None:
    new = replace(item("sku:t"), tags=(("lang", "en"), ("lang", "fr"), ("product", None)))
    assert store.add_items([new, item("sku:u", "product")]) == ["sku:t", "sku:u"]
    view = store.get_item("sku:t")
    assert view is not None
    assert view.tags == {"lang": "en", "product": None}


def test_an_id_that_is_another_items_alias_is_not_created_beside_new_ones(
    store: Store,
) -> None:
    store.add_items([item("sku:1", "product")])
    with store.db.write():
        store.items.create_alias(
            "ean:1", "sku:1", now=store.clock(), task=None, fail_if_exists=True
        )
    assert store.add_items([item("sku:3", "product"), item("ean:1", "product")]) == ["sku:3"]
    view = store.get_item("ean:1")
    assert view is not None
    assert view.id == "sku:1"
    assert store.get_item("sku:3") is not None


def test_item_data_and_tag_values_keep_quotes_unicode_and_nulls(store: Store) -> None:
    data = {"title": 'say "hi"\n', "emoji": "\u00e9\u2603", "none": None, "n": [1, 2.5]}
    new = item("sku:q", title="x")
    store.add_items([replace(new, data=data, tags=(("a'b", 'v"1'), ("empty", None)))])
    view = store.get_item("sku:q")
    assert view is not None
    assert (view.data, view.tags) == (data, {"a'b": 'v"1', "empty": None})


def test_an_alias_resolves_to_its_item_and_cannot_become_an_item(store: Store) -> None:
    store.add_items([item("sku:1", title="Mug")])
    with store.db.write():
        store.items.create_alias(
            "ean:42", "sku:1", now=store.clock(), task=None, fail_if_exists=True
        )
    view = store.get_item("ean:42")
    assert view is not None
    assert (view.id, view.aliases) == ("sku:1", ("ean:42", "sku:1"))
    assert store.add_items([item("ean:42")]) == []
    assert store.get_item("nothing:here") is None


# -- tags select tasks --------------------------------------------------------------------------


def test_registering_a_task_creates_queued_jobs_for_items_already_tagged(
    store: Store, clock: FakeClock
) -> None:
    store.add_items([item("sku:1", "product"), item("sku:2", "review")])
    store.register_tasks([task()])
    job = job_of(store, "sku:1")
    assert (job.status, job.due_at, job.ever_run) == (JobStatus.QUEUED, clock.now, False)
    view = store.get_item("sku:2")
    assert view is not None
    assert view.jobs == ()


def test_adding_a_tagged_item_creates_a_job_due_now(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    assert job_of(store, "sku:1").due_at == clock.now
    assert claimed_ids(claim(store)) == ["sku:1"]


def test_removing_a_tag_makes_the_job_unclaimable_and_adding_it_back_restores_it(
    store: Store,
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    set_tag(store, "sku:1", "product", present=False)
    assert claim(store) == []
    assert job_of(store, "sku:1").selected is False
    set_tag(store, "sku:1", "product", present=True)
    assert claimed_ids(claim(store)) == ["sku:1"]


def test_removing_a_tag_keeps_the_result_and_adding_it_back_does_not_rerun_a_fresh_one(
    store: Store,
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    run_to_done(store, "sku:1", result={"price": 3})
    set_tag(store, "sku:1", "product", present=False)
    assert job_of(store, "sku:1").result == {"price": 3}
    set_tag(store, "sku:1", "product", present=True)
    job = job_of(store, "sku:1")
    assert (job.status, job.result, job.selected) == (JobStatus.DONE, {"price": 3}, True)
    assert claim(store) == []


# -- claiming -----------------------------------------------------------------------------------


def test_a_claim_takes_at_most_its_batch_limit(store: Store) -> None:
    store.register_tasks([task()])
    products(store, *(f"sku:{n}" for n in range(5)))
    first = claim(store, limit=2)
    rest = claim(store, limit=10)
    assert (len(first), len(rest)) == (2, 3)
    assert {j.attempt for j in first + rest} == {1}


def test_claims_lower_niceness_first_within_and_across_tasks(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task("slow", ["a"], niceness=5), task("fast", ["b"], niceness=1)])
    store.add_items([item("x:late", "a", niceness=0)])
    clock.advance(1)
    store.add_items([item("x:nice", "a"), item("x:fast", "b")])
    order = [(j.item_id, j.task) for j in claim(store, "slow", "fast", limit=1)]
    order += [(j.item_id, j.task) for j in claim(store, "slow", "fast", limit=1)]
    order += [(j.item_id, j.task) for j in claim(store, "slow", "fast", limit=1)]
    assert order == [("x:late", "slow"), ("x:fast", "fast"), ("x:nice", "slow")]


def test_claims_the_oldest_due_first(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task()])
    for name in ("sku:c", "sku:a", "sku:b"):
        products(store, name)
        clock.advance(1)
    assert claimed_ids(claim(store, limit=3)) == ["sku:c", "sku:a", "sku:b"]


def test_never_run_jobs_are_claimed_before_reruns_that_are_due_longer(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    products(store, "sku:old")
    run_to_done(store, "sku:old")
    store.expire("price", alias="sku:old")
    clock.advance(10)
    products(store, "sku:new")
    assert due_at(store, "sku:old") < due_at(store, "sku:new")
    assert claimed_ids(claim(store, limit=1)) == ["sku:new"]
    assert claimed_ids(claim(store, limit=1)) == ["sku:old"]


# -- leases -------------------------------------------------------------------------------------


def test_a_claimed_job_is_claimable_again_only_after_its_lease(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    first = claim_one(store, owner="w1")
    assert claim(store, owner="w2") == []
    clock.advance(LEASE - 1)
    assert claim(store, owner="w2") == []
    clock.advance(2)
    assert claim(store, owner="w2") == []  # lapsed: a crashed attempt, settled first
    second = reclaim(store, owner="w2")
    assert (second.job_id, second.attempt) == (first.job_id, first.attempt + 1)
    assert job_of(store, "sku:1").owner == "w2"
    lost = store.failures(task="price")
    assert [(f.attempt, f.error_type) for f in lost] == [(1, "lost")]
    assert "worker w1 ended without a commit" in lost[0].message


def test_renewing_a_lease_keeps_the_job_from_being_claimed(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    job = claim_one(store)
    clock.advance(LEASE - 10)
    assert store.renew([(job.job_id, job.attempt, LEASE)]) == {job.job_id}
    clock.advance(20)  # past the first lease, inside the renewed one
    assert claim(store, owner="w2") == []
    clock.advance(LEASE)
    assert reclaim(store, owner="w2").attempt == 2


def test_renewing_a_lost_lease_is_refused(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    old = claim_one(store, owner="w1")
    clock.advance(LEASE + 1)
    reclaim(store, owner="w2")
    assert store.renew([(old.job_id, old.attempt, LEASE)]) == set()


# -- fenced commit ------------------------------------------------------------------------------


def test_a_commit_stores_the_result_with_its_version_and_time(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    job = claim_one(store)
    clock.advance(5)
    report = commit_one(store, success(job, {"price": 9.99}))
    assert (report.committed, report.stale) == ([job.job_id], [])
    view = job_of(store, "sku:1")
    assert (view.status, view.result, view.result_version) == (JobStatus.DONE, {"price": 9.99}, "1")
    assert (view.result_at, view.due_at, view.owner, view.ever_run) == (clock.now, None, None, True)


def test_a_stale_commit_is_rejected_and_the_newer_result_stands(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    old = claim_one(store, owner="w1")
    clock.advance(LEASE + 1)
    new = reclaim(store, owner="w2")
    commit_one(store, success(new, {"by": "w2"}))
    seq = last_seq(store)
    late = success(old, {"by": "w1"}, effects=(fx.UpdateData(id="sku:1", fn=lambda d: {"x": 1}),))
    report = commit_one(store, late)
    assert (report.committed, report.stale) == ([], [old.job_id])
    assert job_of(store, "sku:1").result == {"by": "w2"}
    assert data_of(store, "sku:1") == {}
    assert journal_kinds(store, since=seq) == ["job.stale"]


def test_a_stale_commit_while_the_newer_attempt_runs_does_not_end_it(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    old = claim_one(store, owner="w1")
    clock.advance(LEASE + 1)
    new = reclaim(store, owner="w2")
    assert commit_one(store, success(old, {"by": "w1"})).stale == [old.job_id]
    assert job_of(store, "sku:1").status == JobStatus.RUNNING
    assert commit_one(store, success(new, {"by": "w2"})).committed == [new.job_id]
    assert job_of(store, "sku:1").result == {"by": "w2"}


def test_a_batch_with_a_lost_attempt_and_its_replacement_commits_only_the_replacement(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    old = claim_one(store, owner="w1")
    clock.advance(LEASE + 1)
    new = reclaim(store, owner="w1")
    report = commit(store, [success(old, {"attempt": 1}), success(new, {"attempt": 2})])
    assert (report.committed, report.stale) == ([new.job_id], [old.job_id])
    assert job_of(store, "sku:1").result == {"attempt": 2}
    assert journal_kinds(store).count("job.done") == 1


# -- failures -----------------------------------------------------------------------------------


def test_a_failure_with_retries_left_is_due_again_after_a_growing_backoff(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task(retries=3)])
    products(store, "sku:1")
    for step in (1, 2, 4):
        job = claim_one(store)
        commit_one(store, failure(job, f"attempt {job.attempt}"))
        assert job_of(store, "sku:1").status == JobStatus.FAILED
        retry_at = due_at(store, "sku:1")
        assert clock.now + 0.5 * BACKOFF * step <= retry_at <= clock.now + BACKOFF * step
        assert claim(store) == []
        clock.now = retry_at
    assert [f.message for f in store.failures(task="price")] == [
        "attempt 3",
        "attempt 2",
        "attempt 1",
    ]


def test_a_failure_after_the_last_retry_is_final(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task(retries=1)])
    products(store, "sku:1")
    commit_one(store, failure(claim_one(store), retries=1))
    clock.advance(BACKOFF)
    commit_one(store, failure(claim_one(store), retries=1))
    view = job_of(store, "sku:1")
    assert (view.status, view.due_at, view.fail_count) == (JobStatus.FAILED, None, 2)
    clock.advance(365 * 86400)
    assert claim(store) == []


def test_retrying_failures_makes_them_due_now_and_marks_them_handled(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task(retries=0), task("stock", retries=0)])
    products(store, "sku:1")
    for job in claim(store, "price", "stock"):
        commit_one(store, failure(job, retries=0))
    assert store.retry_failures(task="price") == 1
    assert claimed_ids(claim(store, "price", "stock")) == ["sku:1"]
    assert job_of(store, "sku:1").fail_count == 0
    assert [f.task for f in store.failures()] == ["stock"]


def test_handling_failures_hides_them_without_retrying(store: Store) -> None:
    store.register_tasks([task(retries=0)])
    products(store, "sku:1", "sku:2")
    for job in claim(store):
        commit_one(store, failure(job, retries=0))
    assert store.handle_failures(alias="sku:2") == 1
    assert [f.item_id for f in store.failures()] == ["sku:1"]
    handled = store.failures(include_handled=True)
    assert sorted((f.item_id, f.handled) for f in handled) == [("sku:1", False), ("sku:2", True)]
    assert claim(store) == []


# -- expire, version bump, TTL ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ({}, ["sku:1", "sku:2", "sku:3"]),
        ({"tag": "sale"}, ["sku:2"]),
        ({"alias": "sku:3"}, ["sku:3"]),
    ],
)
def test_expire_makes_finished_results_due_now(
    store: Store, how: dict[str, str], expected: list[str]
) -> None:
    store.register_tasks([task()])
    store.add_items([item("sku:1", "product"), item("sku:2", "product", "sale")])
    products(store, "sku:3")
    run_to_done(store, "sku:1", "sku:2", "sku:3")
    assert store.expire("price", **how) == len(expected)
    assert sorted(claimed_ids(claim(store))) == expected


def test_expire_leaves_a_running_job_to_its_worker(store: Store) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    job = claim_one(store)
    assert store.expire("price") == 0
    assert claim(store, owner="w2") == []
    assert commit_one(store, success(job)).committed == [job.job_id]


def test_a_new_task_version_requeues_results_of_other_versions(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1", "sku:2")
    run_to_done(store, "sku:1", "sku:2")
    products(store, "sku:3")
    clock.advance(100)
    assert store.register_tasks([task(version="2")]) == {"price": 2}
    assert job_of(store, "sku:1").due_at == clock.now
    assert sorted(claimed_ids(claim(store))) == ["sku:1", "sku:2", "sku:3"]
    assert "task.version" in journal_kinds(store)


def test_registering_the_same_version_requeues_nothing(store: Store) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    run_to_done(store, "sku:1")
    assert store.register_tasks([task()]) == {}
    assert claim(store) == []


def test_a_version_bump_is_one_set_based_update_however_many_jobs(store: Store) -> None:
    store.register_tasks([task()])
    products(store, *(f"sku:{n}" for n in range(40)))
    run_to_done(store, *(f"sku:{n}" for n in range(40)))
    with sql_statements() as seen:
        assert store.register_tasks([task(version="2")]) == {"price": 40}
    job_updates = [s for s in seen if s.lstrip().upper().startswith("UPDATE JOBS")]
    assert len(job_updates) == 1, seen


_ADD_TAG = sa.text("INSERT INTO tags (item_id, name, value) VALUES (:item_id, :name, NULL)")
_COUNT_TAGS = sa.text("SELECT count(*) FROM tags WHERE item_id = :item_id")


def test_a_sent_statement_runs_before_anything_after_it(store: Store) -> None:
    products(store, "sku:1")
    with store.db.write():
        store.db.send(_ADD_TAG, {"item_id": "sku:1", "name": "queued"})
        # PostgreSQL keeps the insert queued; SQLAlchemy's next statement goes after it.
        count = store.db.execute(_COUNT_TAGS, {"item_id": "sku:1"}).scalar()
        assert count == 2
        store.db.send(_ADD_TAG, {"item_id": "sku:1", "name": "fetched"})
        assert store.db.fetch(_COUNT_TAGS, {"item_id": "sku:1"}) == [(3,)]
    assert set(view_tags(store, "sku:1")) == {"product", "queued", "fetched"}


def test_a_sent_statement_that_fails_fails_its_transaction_and_writes_nothing(
    store: Store,
) -> None:
    products(store, "sku:1")
    duplicate = pytest.raises(DataRejected, match=r"(?i)refused a value: .*(unique|duplicate)")
    with duplicate, store.db.write():
        store.db.send(_ADD_TAG, {"item_id": "sku:1", "name": "extra"})
        store.db.send(_ADD_TAG, {"item_id": "sku:1", "name": "product"})  # already there
    assert set(view_tags(store, "sku:1")) == {"product"}
    products(store, "sku:2")  # the connection is usable again
    assert store.get_item("sku:2") is not None


def test_rows_fetched_later_arrive_with_the_commit_in_order(store: Store) -> None:
    products(store, "sku:1")
    with sql_statements() as seen, store.db.write():
        store.db.send(_ADD_TAG, {"item_id": "sku:1", "name": "queued"})
        before = store.db.fetch_later(_COUNT_TAGS, {"item_id": "sku:1"})
        store.db.send(_ADD_TAG, {"item_id": "sku:1", "name": "fetched"})
        after = store.db.fetch_later(_COUNT_TAGS, {"item_id": "sku:1"})
    # Each saw what was sent before it; on PostgreSQL all of it went out with the COMMIT.
    assert (before, after) == ([(2,)], [(3,)])
    if not store.db.is_sqlite:
        assert [s.split()[0].upper() for s in seen][-1] == "COMMIT"


def test_rows_fetched_later_of_a_failed_transaction_never_arrive(store: Store) -> None:
    products(store, "sku:1")
    duplicate = pytest.raises(DataRejected, match=r"(?i)refused a value: .*(unique|duplicate)")
    rows: list[object] = []
    with duplicate, store.db.write():
        store.db.send(_ADD_TAG, {"item_id": "sku:1", "name": "product"})  # already there
        rows = store.db.fetch_later(_COUNT_TAGS, {"item_id": "sku:1"})
    assert rows == []
    assert set(view_tags(store, "sku:1")) == {"product"}


def test_one_statement_fetched_later_for_many_rows_answers_each_in_order(store: Store) -> None:
    """``fetch_many_later``: one statement run once per parameter row (on PostgreSQL one
    executemany in the pipeline), each row's answer in its own list, after what was sent
    before it."""
    products(store, "sku:1", "sku:2", "sku:3")
    with sql_statements() as seen, store.db.write():
        store.db.send(_ADD_TAG, {"item_id": "sku:2", "name": "queued"})
        rows = [{"item_id": i} for i in ("sku:2", "sku:1", "sku:404", "sku:2")]
        counts = store.db.fetch_many_later(_COUNT_TAGS, rows)
        assert store.db.fetch_many_later(_COUNT_TAGS, []) == []
        store.db.send(_ADD_TAG, {"item_id": "sku:3", "name": "after"})
        later = store.db.fetch_later(_COUNT_TAGS, {"item_id": "sku:3"})
    assert counts == [[(2,)], [(1,)], [(0,)], [(2,)]]
    assert later == [(2,)]
    if not store.db.is_sqlite:
        assert [s.split()[0].upper() for s in seen][-1] == "COMMIT"


def test_rows_fetched_later_for_many_rows_of_a_failed_transaction_never_arrive(
    store: Store,
) -> None:
    products(store, "sku:1")
    duplicate = pytest.raises(DataRejected, match=r"(?i)refused a value: .*(unique|duplicate)")
    counts: list[list[Any]] = []
    with duplicate, store.db.write():
        counts = store.db.fetch_many_later(_COUNT_TAGS, [{"item_id": "sku:1"}] * 3)
        store.db.send(_ADD_TAG, {"item_id": "sku:1", "name": "product"})  # already there
    assert counts in ([[], [], []], [[(1,)], [(1,)], [(1,)]])  # SQLite ran them at once
    if not store.db.is_sqlite:
        assert counts == [[], [], []]
    assert set(view_tags(store, "sku:1")) == {"product"}


def view_tags(store: Store, item_id: str) -> dict[str, str | None]:
    view = store.get_item(item_id)
    assert view is not None
    return dict(view.tags)


def test_a_unit_commits_and_claims_in_one_transaction_without_savepoints(store: Store) -> None:
    store.register_tasks([task()])
    products(store, "sku:1", "sku:2")
    first = claim_one(store)
    with sql_statements() as seen, store.db.unit():
        report = commit(store, [success(first, {"price": 1})])
        (second,) = claim(store)
    assert (report.committed, second.item_id) == ([first.job_id], "sku:2")
    words = [s.split()[0].upper() for s in seen]
    assert (words.count("BEGIN"), words.count("COMMIT"), words.count("SAVEPOINT")) == (1, 1, 0)


def test_a_unit_that_fails_undoes_its_commit_and_its_claim(store: Store) -> None:
    store.register_tasks([task()])
    products(store, "sku:1", "sku:2")
    first = claim_one(store)

    def commit_claim_and_fail() -> None:
        with store.db.unit():
            commit(store, [success(first, {"price": 1})])
            assert claimed_ids(claim(store)) == ["sku:2"]
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        commit_claim_and_fail()
    view = job_of(store, "sku:1")
    assert (view.status, view.result) == (JobStatus.RUNNING, None)
    assert job_of(store, "sku:2").status == JobStatus.QUEUED
    assert commit_one(store, success(first, {"price": 1})).committed == [first.job_id]


def test_a_block_nested_inside_a_unit_part_keeps_its_savepoint(store: Store) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")

    def add_and_fail() -> None:
        with store.db.write():
            products(store, "sku:2")
            raise RuntimeError("inner")

    with store.db.unit(), store.db.write():
        with pytest.raises(RuntimeError, match="inner"):
            add_and_fail()
        products(store, "sku:3")
    assert store.get_item("sku:2") is None
    assert store.get_item("sku:3") is not None


def test_a_result_is_due_again_when_its_ttl_passes_after_never_run_jobs(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task(ttl=100)])
    products(store, "sku:old")
    run_to_done(store, "sku:old", ttl=100)
    assert job_of(store, "sku:old").due_at == clock.now + 100
    clock.advance(99)
    assert claim(store) == []
    clock.advance(2)
    products(store, "sku:new")
    assert claimed_ids(claim(store, limit=1)) == ["sku:new"]
    stale = claim_one(store)
    assert (stale.item_id, stale.attempt) == ("sku:old", 2)


# -- status and journal -------------------------------------------------------------------------


def test_status_counts_jobs_by_state_per_task(store: Store, clock: FakeClock) -> None:
    store.register_tasks([task(retries=0), task("stock", ["other"])])
    products(store, "sku:1", "sku:2", "sku:3", "sku:4")
    done, failed, running = claim(store, limit=3)
    commit(store, [success(done), failure(failed, retries=0)])
    clock.advance(1)
    counts = {c.task: c for c in store.status()}
    price = counts["price"]
    assert (price.queued, price.running, price.done, price.failed) == (1, 1, 1, 1)
    assert (price.due_now, price.unhandled_failures, price.version) == (1, 1, "1")
    assert (counts["stock"].queued, counts["stock"].due_now) == (0, 0)
    assert running.item_id not in (done.item_id, failed.item_id)


def test_the_journal_has_one_row_per_committed_change(store: Store) -> None:
    store.register_tasks([task()])
    seq = last_seq(store)
    products(store, "sku:1", "sku:2")
    assert journal_kinds(store, since=seq) == ["item.created", "item.created"]
    seq = last_seq(store)
    run_to_done(store, "sku:1", "sku:2")
    entries = store.journal(seq)
    assert [(e.kind, e.item_id, e.task) for e in entries] == [
        ("job.done", "sku:1", "price"),
        ("job.done", "sku:2", "price"),
    ]
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)


def test_a_commit_whose_journal_write_fails_is_undone_entirely(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.register_tasks([task()])
    products(store, "sku:1")
    job = claim_one(store)

    def broken(rows: Any) -> None:
        raise RuntimeError("journal unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(store, "journal_many", broken)
        with pytest.raises(RuntimeError, match="journal unavailable"):
            commit_one(store, success(job, {"price": 1}))
    view = job_of(store, "sku:1")
    assert (view.status, view.result) == (JobStatus.RUNNING, None)
    assert commit_one(store, success(job, {"price": 1})).committed == [job.job_id]


@pytest.mark.postgres
def test_a_connection_lost_at_the_journal_write_is_an_outage_and_writes_nothing(
    pg_url: str,
) -> None:
    with Store(pg_url) as store:
        store.register_tasks([task()])
        products(store, "sku:1")
        before = len(store.journal())
        pid = store.db.execute(sa.text("SELECT pg_backend_pid()")).scalar()
        unavailable = pytest.raises(DatabaseUnavailable, match="cannot reach the database")
        with unavailable, store.db.write():
            store.items.add_tag("sku:1", "extra", None, now=store.clock())
            # Journal rows are written last, just before COMMIT: lose the connection after
            # everything else.
            with psycopg.connect(pg_url, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # The next call opens a new connection: nothing of the transaction was kept.
        assert len(store.journal()) == before
        view = store.get_item("sku:1")
        assert view is not None
        assert "extra" not in view.tags


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("", "is empty"),
        ("x" * (MAX_ID_LENGTH + 1), "the maximum is"),
        ("url:a\nb", "control character"),
        ("url:\x00", "control character"),
    ],
)
def test_bad_item_ids_are_rejected_naming_the_problem(bad: str, reason: str) -> None:
    with pytest.raises(InvalidItemId, match=reason):
        check_id(bad)


def test_the_longest_allowed_id_is_stored(store: Store) -> None:
    longest = "x" * MAX_ID_LENGTH
    assert store.add_items([item(check_id(longest))]) == [longest]


def test_expire_of_an_unknown_task_names_the_known_ones(store: Store) -> None:
    store.register_tasks([task()])
    with pytest.raises(UnknownTask, match=r"'nope'.*price"):
        store.expire("nope")


def test_expire_of_an_unknown_item_says_so(store: Store) -> None:
    store.register_tasks([task()])
    with pytest.raises(ItemNotFound, match="sku:missing"):
        store.expire("price", alias="sku:missing")


def test_retrying_failures_of_an_unknown_task_is_an_error(store: Store) -> None:
    with pytest.raises(UnknownTask, match="none yet"):
        store.retry_failures(task="nope")
