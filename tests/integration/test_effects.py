"""What a task asks of its context, applied when its attempt commits (both backends).

Each test claims a real job, lets a real :class:`~trawl.runtime.context.Context` record what
the "task" asks for, then commits the attempt as a worker would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.helpers import (
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
    success,
    task,
)
from trawl.model.records import CommitReport, ItemView
from trawl.model.states import JobStatus
from trawl.runtime.context import Context, asks
from trawl.store.store import Store

Body = Callable[[Context], Any]


class NoReads:
    """A reader for contexts whose tasks read nothing but their own item."""

    async def get_item(self, alias: str) -> ItemView | None:
        raise AssertionError("this task was not expected to read")

    async def get_metadata(self, task: str, alias: str) -> dict[str, Any] | None:
        raise AssertionError("this task was not expected to read")


def attempt(
    store: Store,
    body: Body,
    *,
    task_name: str = "price",
    returns: dict[str, Any] | None = None,
    fails: bool = False,
) -> CommitReport:
    """Claim the one due *task_name* job, run *body* on its context, commit the outcome."""
    job = claim_one(store, task_name)
    ctx = Context(
        id=job.item_id,
        data=job.data,
        tags=job.tags,
        attempt=job.attempt,
        task=job.task,
        reader=NoReads(),
    )
    body(ctx)
    if fails:
        return commit_one(
            store,
            failure(
                job, effects=tuple(asks(ctx).effects), allow=asks(ctx).allow_failure, retries=0
            ),
        )
    return commit_one(store, success(job, returns, effects=tuple(asks(ctx).effects)))


def failed_because(store: Store, report: CommitReport, alias: str, reason: str) -> None:
    """The attempt was turned into a recorded failure whose message says *reason*."""
    assert report.committed
    assert not report.stale
    assert reason in next(iter(report.effect_failures.values()))
    view = job_of(store, alias)
    assert (view.status, view.result) == (JobStatus.FAILED, None)
    assert reason in store.failures(item_id=view_id(store, alias))[0].message


def view_id(store: Store, alias: str) -> str:
    view = store.get_item(alias)
    assert view is not None
    return view.id


def aliases_of(store: Store, alias: str) -> tuple[str, ...]:
    view = store.get_item(alias)
    assert view is not None
    return view.aliases


@pytest.fixture
def tasks(store: Store) -> Store:
    """``price`` runs on ``product`` items, ``stock`` on ``stock`` items."""
    store.register_tasks([task("price", ["product"]), task("stock", ["stock"])])
    return store


# -- items ----------------------------------------------------------------------------------


def test_create_item_adds_a_tagged_item_created_by_the_running_one(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])
    attempt(tasks, lambda ctx: ctx.create_item("review:1", tags=["stock"], data={"n": 1}))
    view = tasks.get_item("review:1")
    assert view is not None
    assert (view.data, view.tags, view.created_by) == ({"n": 1}, {"stock": None}, "sku:1")
    assert claimed_ids(claim(tasks, "stock")) == ["review:1"]


def test_create_item_leaves_an_existing_item_alone(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product"), item("review:1", n=0)])
    report = attempt(tasks, lambda ctx: ctx.create_item("review:1", data={"n": 1}))
    assert report.effect_failures == {}
    assert data_of(tasks, "review:1") == {"n": 0}


def test_create_item_that_must_be_new_fails_the_attempt_and_applies_nothing(
    tasks: Store,
) -> None:
    tasks.add_items([item("sku:1", "product"), item("review:1")])
    seq = last_seq(tasks)

    def body(ctx: Context) -> None:
        ctx.update_data(lambda d: {"touched": True})
        ctx.create_item("review:2")
        ctx.log("note", "before the clash")
        ctx.create_item("review:1", fail_if_exists=True)

    report = attempt(tasks, body, returns={"price": 1})
    failed_because(tasks, report, "sku:1", "already exists")
    assert data_of(tasks, "sku:1") == {}
    assert tasks.get_item("review:2") is None
    assert journal_kinds(tasks, since=seq) == ["job.failed"]


def test_rename_item_keeps_the_old_id_resolving_and_moves_aliases_and_jobs(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product", title="Mug")])
    with tasks.db.write():
        tasks.items.create_alias("ean:1", "sku:1", now=0, task=None, fail_if_exists=True)
    attempt(tasks, lambda ctx: ctx.rename_item("sku:mug"), returns={"price": 2})
    assert view_id(tasks, "sku:1") == view_id(tasks, "ean:1") == "sku:mug"
    assert aliases_of(tasks, "sku:mug") == ("ean:1", "sku:1", "sku:mug")
    assert job_of(tasks, "sku:mug").result == {"price": 2}
    assert data_of(tasks, "sku:1") == {"title": "Mug"}


def test_effects_after_a_rename_still_find_the_item_by_its_old_id(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])

    def body(ctx: Context) -> None:
        ctx.rename_item("sku:mug")
        ctx.update_data(lambda d: {"renamed": True})
        ctx.add_tags("stock")

    attempt(tasks, body)
    assert data_of(tasks, "sku:mug") == {"renamed": True}
    assert claimed_ids(claim(tasks, "stock")) == ["sku:mug"]


def test_a_task_deleting_its_own_item_commits(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])
    report = attempt(tasks, lambda ctx: ctx.delete_item(), returns={"gone": True})
    assert (len(report.committed), report.effect_failures) == (1, {})
    assert tasks.get_item("sku:1") is None
    assert journal_kinds(tasks)[-2:] == ["item.deleted", "job.done"]


def test_rename_to_an_id_in_use_fails_the_attempt(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product"), item("sku:2")])
    report = attempt(tasks, lambda ctx: ctx.rename_item("sku:2"))
    failed_because(tasks, report, "sku:1", "belongs to 'sku:2'")
    assert view_id(tasks, "sku:1") == "sku:1"


def test_delete_item_removes_it_with_its_aliases_and_jobs(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product"), item("sku:2", "stock")])
    with tasks.db.write():
        tasks.items.create_alias("ean:2", "sku:2", now=0, task=None, fail_if_exists=True)
    attempt(tasks, lambda ctx: ctx.delete_item("ean:2"))
    assert tasks.get_item("sku:2") is None
    assert tasks.get_item("ean:2") is None
    assert claim(tasks, "stock") == []
    assert "item.deleted" in journal_kinds(tasks)


# -- merge ----------------------------------------------------------------------------------


def merge_b_into_a(tasks: Store, **merge_metadata: Callable[..., Any]) -> None:
    tasks.add_items([item("run:1", "product")])
    attempt(
        tasks,
        lambda ctx: ctx.merge_item(
            "sku:a",
            lambda into, from_: {**from_, **into, "from": sorted(from_)},
            merge_metadata=merge_metadata,
            from_="sku:b",
        ),
    )


def test_merge_combines_data_and_leaves_every_alias_of_the_merged_item_as_a_redirect(
    tasks: Store,
) -> None:
    tasks.add_items([item("sku:a", x=1), item("sku:b", x=2, y=3)])
    with tasks.db.write():
        tasks.items.create_alias("ean:b", "sku:b", now=0, task=None, fail_if_exists=True)
    merge_b_into_a(tasks)
    assert data_of(tasks, "sku:a") == {"x": 1, "y": 3, "from": ["x", "y"]}
    assert view_id(tasks, "sku:b") == view_id(tasks, "ean:b") == "sku:a"
    assert aliases_of(tasks, "sku:a") == ("ean:b", "sku:a", "sku:b")
    assert "item.merged" in journal_kinds(tasks)


def add_stock_result(tasks: Store, clock: FakeClock, alias: str, result: dict[str, Any]) -> None:
    tasks.add_items([item(alias, "stock")])
    commit_one(tasks, success(claim_one(tasks, "stock"), result))
    clock.advance(10)


@pytest.mark.parametrize(
    ("older", "newer", "kept"),
    [("sku:a", "sku:b", {"n": "b"}), ("sku:b", "sku:a", {"n": "a"})],
)
def test_merge_without_a_metadata_merger_keeps_the_newest_result(
    tasks: Store, clock: FakeClock, older: str, newer: str, kept: dict[str, str]
) -> None:
    add_stock_result(tasks, clock, older, {"n": older[-1]})
    add_stock_result(tasks, clock, newer, {"n": newer[-1]})
    merge_b_into_a(tasks)
    assert job_of(tasks, "sku:a", "stock").result == kept


def test_merge_with_a_metadata_merger_uses_it(tasks: Store, clock: FakeClock) -> None:
    add_stock_result(tasks, clock, "sku:a", {"n": 1})
    add_stock_result(tasks, clock, "sku:b", {"n": 2})
    merge_b_into_a(tasks, stock=lambda ours, theirs: {"n": ours["n"] + theirs["n"]})
    assert job_of(tasks, "sku:a", "stock").result == {"n": 3}


def test_merge_takes_the_merged_items_result_where_the_other_has_none(
    tasks: Store, clock: FakeClock
) -> None:
    tasks.add_items([item("sku:a")])
    add_stock_result(tasks, clock, "sku:b", {"n": 2})
    merge_b_into_a(tasks)
    assert job_of(tasks, "sku:a", "stock").result == {"n": 2}


def test_a_task_merging_its_own_item_away_leaves_its_result_on_the_survivor(
    tasks: Store, clock: FakeClock
) -> None:
    tasks.add_items([item("sku:a", "product", kept=1)])
    commit_one(tasks, success(claim_one(tasks), {"price": 1}))
    clock.advance(10)
    tasks.add_items([item("sku:dup", "product", extra=2)])
    attempt(
        tasks,
        lambda ctx: ctx.merge_item("sku:a", lambda into, from_: {**into, **from_}),
        returns={"price": 2},
    )
    assert view_id(tasks, "sku:dup") == "sku:a"
    assert data_of(tasks, "sku:a") == {"kept": 1, "extra": 2}
    assert job_of(tasks, "sku:a").result == {"price": 2}


# -- aliases --------------------------------------------------------------------------------


def test_an_alias_to_an_alias_stores_the_final_item(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])

    def body(ctx: Context) -> None:
        ctx.create_alias("ean:1")
        ctx.create_alias("upc:1", to="ean:1")
        ctx.delete_alias("ean:1")

    attempt(tasks, body)
    assert view_id(tasks, "upc:1") == "sku:1"
    assert tasks.get_item("ean:1") is None


def test_create_alias_of_a_taken_alias_is_ignored_unless_it_must_be_new(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product"), item("sku:2")])
    attempt(tasks, lambda ctx: ctx.create_alias("sku:2"))
    assert view_id(tasks, "sku:2") == "sku:2"
    tasks.add_items([item("sku:3", "product")])
    report = attempt(tasks, lambda ctx: ctx.create_alias("sku:2", fail_if_exists=True))
    failed_because(tasks, report, "sku:3", "already exists")


def test_deleting_an_items_own_id_as_an_alias_fails_the_attempt(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product"), item("sku:2")])
    report = attempt(tasks, lambda ctx: ctx.delete_alias("sku:2"))
    failed_because(tasks, report, "sku:1", "own id")
    assert view_id(tasks, "sku:2") == "sku:2"


# -- data and metadata ----------------------------------------------------------------------


def test_update_data_runs_against_the_data_as_it_is_at_commit(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product", n=1)])
    job = claim_one(tasks)
    ctx = Context(id=job.item_id, data=job.data, tags={}, attempt=1, task="price", reader=NoReads())
    ctx.update_data(lambda d: {**d, "seen": d["n"]})
    with tasks.db.write():  # someone else changed the item while the task ran
        tasks.items.set_data("sku:1", {"n": 2}, tasks.clock(), None)
    commit_one(tasks, success(job, effects=tuple(asks(ctx).effects)))
    assert data_of(tasks, "sku:1") == {"n": 2, "seen": 2}


def test_update_data_that_returns_no_object_fails_the_attempt(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product", n=1)])
    report = attempt(tasks, lambda ctx: ctx.update_data(lambda d: [d]))
    failed_because(tasks, report, "sku:1", "update_data result")
    assert data_of(tasks, "sku:1") == {"n": 1}


def test_update_metadata_gets_an_empty_object_when_there_is_none(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])
    given: list[dict[str, Any]] = []

    def record(old: dict[str, Any]) -> dict[str, Any]:
        given.append(old)
        return {**old, "checked": True}

    attempt(tasks, lambda ctx: ctx.update_metadata(record))
    assert given == [{}]
    assert job_of(tasks, "sku:1").result == {"checked": True}


def test_update_metadata_of_another_task_keeps_its_ttl(tasks: Store, clock: FakeClock) -> None:
    tasks.add_items([item("sku:1", "product", "stock")])
    stock = claim_one(tasks, "stock")
    commit_one(tasks, success(stock, {"n": 1}, ttl=100))
    before = job_of(tasks, "sku:1", "stock")
    clock.advance(50)
    attempt(tasks, lambda ctx: ctx.update_metadata(lambda m: {**m, "note": 1}, task="stock"))
    after = job_of(tasks, "sku:1", "stock")
    assert after.result == {"n": 1, "note": 1}
    assert (after.result_at, after.expires_at, after.due_at) == (
        before.result_at,
        before.expires_at,
        before.due_at,
    )


def test_update_metadata_of_a_task_that_never_ran_does_not_stop_it_running(
    tasks: Store,
) -> None:
    tasks.add_items([item("sku:1", "product")])
    attempt(tasks, lambda ctx: ctx.update_metadata(lambda m: {"hint": 1}, task="stock"))
    assert job_of(tasks, "sku:1", "stock").result == {"hint": 1}
    with tasks.db.write():
        tasks.items.add_tag("sku:1", "stock", None, now=tasks.clock())
    assert claimed_ids(claim(tasks, "stock")) == ["sku:1"]


# -- expiry and TTL -------------------------------------------------------------------------


def test_expire_from_a_task_makes_another_tasks_result_due_now(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product", "stock")])
    commit_one(tasks, success(claim_one(tasks, "stock"), {"n": 1}))
    attempt(tasks, lambda ctx: ctx.expire(task="stock"))
    assert claimed_ids(claim(tasks, "stock")) == ["sku:1"]


@pytest.mark.parametrize(("ttl", "due_now"), [("100s", False), ("30s", True)])
def test_set_ttl_counts_from_the_results_time(
    tasks: Store, clock: FakeClock, ttl: str, due_now: bool
) -> None:
    tasks.add_items([item("sku:1", "product", "stock")])
    commit_one(tasks, success(claim_one(tasks, "stock"), {"n": 1}))
    result_at = clock.now
    clock.advance(50)
    attempt(tasks, lambda ctx: ctx.set_ttl(ttl, task="stock"))
    assert due_at(tasks, "sku:1", "stock") == result_at + int(ttl[:-1])
    assert claimed_ids(claim(tasks, "stock")) == (["sku:1"] if due_now else [])


def test_set_ttl_on_its_own_task_counts_from_this_result(tasks: Store, clock: FakeClock) -> None:
    tasks.add_items([item("sku:1", "product")])
    attempt(tasks, lambda ctx: ctx.set_ttl("1h"), returns={"p": 1})
    assert due_at(tasks, "sku:1") == clock.now + 3600


# -- tags, log, allow_failure ---------------------------------------------------------------


def test_add_tags_creates_due_jobs_and_remove_tags_deselects_them(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])
    attempt(tasks, lambda ctx: ctx.add_tags("stock", ("sale", "50%")))
    view = tasks.get_item("sku:1")
    assert view is not None
    assert view.tags == {"product": None, "sale": "50%", "stock": None}
    assert claimed_ids(claim(tasks, "stock")) == ["sku:1"]
    tasks.expire("price")
    attempt(tasks, lambda ctx: ctx.remove_tags("product"), returns={"p": 2})
    job = job_of(tasks, "sku:1")
    assert (job.selected, job.result) == (False, {"p": 2})
    tasks.expire("price")
    assert claim(tasks, "price") == []


def test_log_writes_a_journal_row_with_the_attempt(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])
    seq = last_seq(tasks)
    attempt(tasks, lambda ctx: ctx.log("fetch", "200 OK in 12ms"))
    entries = [(e.kind, e.item_id, e.task, e.detail) for e in tasks.journal(seq)]
    assert ("log", "sku:1", "price", {"category": "fetch", "message": "200 OK in 12ms"}) in entries
    assert [kind for kind, *_ in entries] == ["log", "job.done"]


def fetch_then_fail(ctx: Context) -> None:
    ctx.update_data(lambda d: {**d, "fetched": True})
    ctx.update_metadata(lambda m: {"last_error": "timeout"})
    ctx.create_item("review:1")


def test_a_failed_attempt_that_allowed_failure_keeps_its_effects(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])
    report = attempt(tasks, lambda ctx: (fetch_then_fail(ctx), ctx.allow_failure()), fails=True)
    assert report.committed
    job = job_of(tasks, "sku:1")
    assert (job.status, job.result) == (JobStatus.FAILED, {"last_error": "timeout"})
    assert data_of(tasks, "sku:1") == {"fetched": True}
    assert tasks.get_item("review:1") is not None
    assert len(tasks.failures(item_id="sku:1")) == 1


def test_a_failed_attempt_applies_nothing_it_asked_for(tasks: Store) -> None:
    tasks.add_items([item("sku:1", "product")])
    seq = last_seq(tasks)
    attempt(tasks, fetch_then_fail, fails=True)
    job = job_of(tasks, "sku:1")
    assert (job.status, job.result) == (JobStatus.FAILED, None)
    assert data_of(tasks, "sku:1") == {}
    assert tasks.get_item("review:1") is None
    assert journal_kinds(tasks, since=seq) == ["job.failed"]
