"""Adding a file's items through a stage (``Store.stage_items``), on both backends: the same
items, tags, jobs and journal as :meth:`Store.add_items`, nothing written before ``write``.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from msgspec import structs

from tests.integration.helpers import (
    FakeClock,
    claim_one,
    commit_one,
    database_user,
    failure,
    item,
    job_of,
    last_seq,
    task,
)
from trawl.model.errors import DatabaseUnavailable, TrawlError
from trawl.model.records import NewItem
from trawl.store import staging
from trawl.store.store import Store

TASKS = [
    task("price", ["product"]),
    task("review", ["review", "sale"], niceness=3),  # two tags select it: one job
]
TAG_NAMES = ("product", "sale", "review", "lang")


def stage_and_write(
    store: Store, items: Sequence[NewItem], batch_size: int, writers: int = 1
) -> list[int]:
    """What ``trawl add --file`` does with a good file: how many each batch created."""
    with store.stage_items(writers=writers) as stage:
        assert stage.add(iter(items)) == len(items)
        batches = list(stage.write(batch_size))
    assert sum(b.items for b in batches) == len(items)
    return [b.made for b in batches]


def in_space(space: str, new: NewItem) -> NewItem:
    return replace(new, id=f"{space}{new.id}")


def random_items(rng: random.Random, count: int) -> list[NewItem]:
    """Ids from a small pool (repeats), tags named twice now and then, mixed niceness."""
    items = []
    for n in range(count):
        tags = [(rng.choice(TAG_NAMES), rng.choice([None, "en", "fr"])) for _ in range(3)]
        items.append(
            NewItem(
                id=f"id:{rng.randrange(12)}",
                tags=tuple(tags[: rng.randrange(4)]),
                data={"n": n},
                niceness=rng.choice([None, 0, 5]),
            )
        )
    return items


def state(store: Store, space: str, ids: Iterator[str]) -> dict[str, Any]:
    """Every item of the pool as seen through its id, ids without the space."""
    found: dict[str, Any] = {}
    for item_id in ids:
        view = store.get_item(f"{space}{item_id}")
        if view is not None:
            jobs = sorted((j.task, j.status, j.due_at, j.niceness, j.selected) for j in view.jobs)
            aliases = tuple(a.removeprefix(space) for a in view.aliases)
            found[item_id] = (view.id.removeprefix(space), view.data, view.tags, aliases, jobs)
    return found


def journal_of(store: Store, since: int, space: str) -> list[tuple[str, str, Any]]:
    return [
        (e.kind, (e.item_id or "").removeprefix(space), e.detail)
        for e in store.journal(since, limit=10_000)
        if (e.item_id or "").startswith(space)
    ]


def existing(store: Store, space: str) -> None:
    """Ids in use before the file: two items, and an alias of the first."""
    store.add_items([item(f"{space}id:0", "product", n=-1), item(f"{space}id:1", n=-2)])
    with store.db.write():
        store.items.create_alias(
            f"{space}id:2", f"{space}id:0", now=store.clock(), task=None, fail_if_exists=True
        )


@pytest.mark.parametrize("seed", range(6))
def test_staged_items_are_written_as_add_items_writes_them(store: Store, seed: int) -> None:
    rng = random.Random(seed)
    store.register_tasks(TASKS)
    items = random_items(rng, 30)
    batch_size = rng.choice([1, 4, 7, 30])
    existing(store, "a:")
    existing(store, "b:")
    seq = last_seq(store)

    created = store.add_items([in_space("a:", i) for i in items])
    per_batch = stage_and_write(store, [in_space("b:", i) for i in items], batch_size)

    assert sum(per_batch) == len(created)
    assert len(per_batch) == -(-len(items) // batch_size)
    pool = [f"id:{n}" for n in range(12)]
    assert state(store, "b:", iter(pool)) == state(store, "a:", iter(pool))
    assert journal_of(store, seq, "b:") == journal_of(store, seq, "a:")


def test_items_are_staged_alike_when_the_tags_encoded_are_forgotten_often(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage encodes each set of tags once, in a bounded cache: emptied every second
    set, the rows (tags, journal details) are still the ones add_items writes."""
    monkeypatch.setattr(staging, "_ENCODED_MAX", 2)
    test_staged_items_are_written_as_add_items_writes_them(store, seed=7)


def test_items_are_journaled_in_the_order_staged_and_the_first_of_an_id_wins(
    store: Store,
) -> None:
    seq = last_seq(store)
    items = [item("s:3", n=1), item("s:1"), item("s:3", n=2), item("s:2")]
    assert stage_and_write(store, items, 2) == [2, 1]  # the second s:3 finds it taken
    assert [e.item_id for e in store.journal(seq)] == ["s:3", "s:1", "s:2"]
    view = store.get_item("s:3")
    assert view is not None
    assert view.data == {"n": 1}


def test_a_new_item_gets_the_jobs_its_tags_select_with_its_own_niceness(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks(TASKS)
    items = [item("j:1", "product", "sale", "review"), item("j:2", "sale", niceness=-4)]
    assert stage_and_write(store, items, 10) == [2]
    one = store.get_item("j:1")
    assert one is not None
    assert sorted((j.task, j.niceness, j.due_at) for j in one.jobs) == [
        ("price", 0, clock.now),
        ("review", 3, clock.now),
    ]
    assert job_of(store, "j:2", "review").niceness == -4


def stage_then_fail(store: Store) -> None:
    """Stage two items, then fail as ``trawl add --file`` does on a file with bad lines."""
    with store.stage_items() as stage:
        stage.add(iter([item("x:1", "product"), item("x:2")]))
        assert store.get_item("x:1") is None  # staged only
        raise RuntimeError("bad line")


def test_nothing_is_written_before_write_nor_when_the_block_fails(store: Store) -> None:
    seq = last_seq(store)
    with pytest.raises(RuntimeError, match="bad line"):
        stage_then_fail(store)
    assert store.get_item("x:1") is None
    assert store.journal(seq) == []
    # the stage is gone with the block: a new one starts empty
    assert stage_and_write(store, [item("x:3")], 10) == [1]
    assert store.get_item("x:2") is None


def test_an_empty_stage_writes_nothing(store: Store) -> None:
    assert stage_and_write(store, [], 10) == []


def test_an_id_in_use_as_an_alias_is_left_as_it_is(store: Store) -> None:
    store.add_items([item("sku:1", "product")])
    with store.db.write():
        store.items.create_alias(
            "ean:1", "sku:1", now=store.clock(), task=None, fail_if_exists=True
        )
    assert stage_and_write(store, [item("sku:3", "product"), item("ean:1", "product")], 10) == [1]
    view = store.get_item("ean:1")
    assert view is not None
    assert view.id == "sku:1"
    with store.read():
        rows = store.db.execute(sa.text("SELECT count(*) FROM items WHERE id = 'ean:1'"))
        assert rows.scalar() == 0  # no items row left behind


def test_an_existing_id_disabled_as_not_found_is_listed_again(
    store: Store, clock: FakeClock
) -> None:
    store.register_tasks([task(retries=0)])
    store.add_items([item("sku:0", "product")])
    job = claim_one(store)
    gone = structs.replace(failure(job, "gone", retries=0), not_found=True, retry_delay=None)
    commit_one(store, gone)
    assert job_of(store, "sku:0").due_at is None  # disabled until listed again
    clock.advance(60)
    assert stage_and_write(store, [item("sku:0", "product")], 10) == [0]
    assert job_of(store, "sku:0").due_at == clock.now


JOURNAL_ROW = sa.text(
    "INSERT INTO journal (at, kind, item_id, task, detail) SELECT :now, 'test', :id, NULL, NULL"
)


def fail_after_journaling(store: Store, item_id: str) -> None:
    with store.db.write():
        store.db.journal_from(JOURNAL_ROW, {"now": store.clock(), "id": item_id})
        raise RuntimeError("undone")


def test_a_journal_statement_runs_only_if_its_transaction_or_savepoint_holds(
    store: Store,
) -> None:
    seq = last_seq(store)
    with pytest.raises(RuntimeError, match="undone"):
        fail_after_journaling(store, "rolled-back")
    with store.db.write():
        store.db.journal_from(JOURNAL_ROW, {"now": store.clock(), "id": "kept"})
        with contextlib.suppress(RuntimeError), store.db.savepoint():
            store.db.journal_from(JOURNAL_ROW, {"now": store.clock(), "id": "savepoint"})
            raise RuntimeError("undone")
    assert [(e.kind, e.item_id) for e in store.journal(seq)] == [("test", "kept")]


@pytest.mark.postgres
def test_a_stage_needs_a_database_user_that_may_create_temporary_tables(
    pg_url: str, clock: FakeClock
) -> None:
    revoke = "REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC"
    grant = "GRANT TEMPORARY ON DATABASE {database} TO PUBLIC"
    with (
        database_user(pg_url, "no_temp", setup=[revoke], undo=[grant]) as url,
        Store(url, clock=clock) as store,
        pytest.raises(TrawlError, match="TEMPORARY"),
    ):
        stage_and_write(store, [item("t:1")], 10)


def stage_then_lose_the_connection(store: Store, admin_url: str) -> None:
    with store.stage_items() as stage:
        stage.add(iter([item("l:1")]))
        with store.read():
            pid = store.db.execute(sa.text("SELECT pg_backend_pid()")).scalar()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        list(stage.write(10))


def test_a_copy_fed_a_row_at_a_time_is_for_postgresql(store: Store) -> None:
    if store.is_sqlite:
        with pytest.raises(TypeError, match="copying\\(\\) is for PostgreSQL"):
            store.db.copying("trawl_stage", [("n", "int8")]).__enter__()
        return
    with store.db.scratch():
        store.db.execute(sa.text("CREATE TEMP TABLE t_rows (n int8) ON COMMIT DROP"))
        with store.db.copying("t_rows", [("n", "int8")]) as send:
            for n in range(3):
                send((n,))
        assert store.db.execute(sa.text("SELECT sum(n) FROM t_rows")).scalar() == 3


def test_writers_are_at_least_one_and_sqlite_has_one(store: Store) -> None:
    with pytest.raises(TrawlError, match="writers must be at least 1, not 0"):
        stage_and_write(store, [item("w:1")], 10, writers=0)
    if store.is_sqlite:
        with pytest.raises(TrawlError, match="SQLite has one writer"):
            stage_and_write(store, [item("w:1")], 10, writers=2)
    assert store.get_item("w:1") is None


@pytest.mark.postgres
def test_a_connection_lost_after_staging_is_an_outage_and_writes_nothing(
    pg_url: str, clock: FakeClock
) -> None:
    with Store(pg_url, clock=clock) as store:
        with pytest.raises(DatabaseUnavailable):
            stage_then_lose_the_connection(store, pg_url)
        assert store.get_item("l:1") is None  # a new connection, and nothing was written
