"""Adding a file's items with several writers (PostgreSQL): the items spread over
connections by id, each connection writing its batches at the same time as the others.

The result must be what one writer makes (and what ``Store.add_items`` makes): the same
items, tags, jobs and journal rows, the first line of an id winning. What changes is only
the journal's order between connections. A batch that loses a lock wait is tried again;
one that keeps losing stops every writer and is raised.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterator

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
from tests.integration.test_item_stage import (
    TASKS,
    existing,
    in_space,
    journal_of,
    random_items,
    stage_and_write,
    state,
)
from trawl.model.errors import DatabaseUnavailable, TransientConflict
from trawl.store import staging
from trawl.store.store import Store

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_url: str, clock: FakeClock) -> Iterator[Store]:
    with Store(pg_url, clock=clock) as opened:
        yield opened


@pytest.mark.parametrize("seed", range(6))
def test_several_writers_write_what_one_writes(store: Store, seed: int) -> None:
    rng = random.Random(seed)
    store.register_tasks(TASKS)
    items = random_items(rng, 60)
    batch_size = rng.choice([1, 4, 7, 60])
    writers = rng.choice([2, 3])
    existing(store, "a:")
    existing(store, "b:")
    seq = last_seq(store)

    one = stage_and_write(store, [in_space("a:", i) for i in items], batch_size)
    several = stage_and_write(store, [in_space("b:", i) for i in items], batch_size, writers)

    assert sum(several) == sum(one)
    pool = [f"id:{n}" for n in range(12)]
    assert state(store, "b:", iter(pool)) == state(store, "a:", iter(pool))
    # the same journal rows (one per created item), in another order
    assert sorted(journal_of(store, seq, "b:"), key=repr) == sorted(
        journal_of(store, seq, "a:"), key=repr
    )


def test_the_first_line_of_an_id_wins_whichever_writer_is_first(store: Store) -> None:
    items = [item(f"f:{n % 50}", n=n) for n in range(400)]
    with store.stage_items(writers=3) as stage:
        stage.add(iter(items))
        # every line of an id is on one connection, behind the id's earlier lines
        shares = []
        for one in stage.stages:
            with one.db.read():
                rows = one.db.execute(sa.text("SELECT id FROM trawl_stage ORDER BY n"))
                shares.append([r[0] for r in rows])
        assert sum(len(s) for s in shares) == 400
        assert sum(len(set(s)) for s in shares) == 50
        assert sum(w.made for w in stage.write(7)) == 50
    for n in range(50):
        view = store.get_item(f"f:{n}")
        assert view is not None
        assert view.data == {"n": n}


def test_writers_use_their_own_connections_and_close_them(store: Store, pg_url: str) -> None:
    def trawl_sessions() -> int:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            name = sa.make_url(pg_url).database
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                " AND application_name = 'trawl'",
                [name],
            ).fetchone()
            assert row is not None
            return int(row[0])

    store.get_item("warm-up")  # this store's own connection
    before = trawl_sessions()
    with store.stage_items(writers=3) as stage:
        stage.add(iter([item(f"c:{n}") for n in range(30)]))
        assert trawl_sessions() == before + 2
        assert sum(w.made for w in stage.write(4)) == 30
    assert trawl_sessions() == before
    assert not [t for t in threading.enumerate() if t.name.startswith("trawl-add-")]


def test_a_caller_that_stops_reading_the_batches_stops_the_writers(store: Store) -> None:
    """Leaving the loop over ``write`` (an error in the caller, Ctrl-C) stops each writer after
    its batch and waits for it; what was written is whole and the rest can follow."""
    items = [item(f"e:{n}", "product") for n in range(400)]
    store.register_tasks(TASKS)
    with store.stage_items(writers=2) as stage:
        stage.add(iter(items))
        batches = stage.write(5)
        first = next(batches)
        batches.close()
        assert not [t for t in threading.enumerate() if t.name.startswith("trawl-add-")]
    assert first.made == 5
    created = [v for v in (store.get_item(i.id) for i in items) if v is not None]
    assert 5 <= len(created) < 400
    for view in created:
        assert [j.task for j in view.jobs] == ["price"]
    assert sum(stage_and_write(store, items, 5, writers=2)) == 400 - len(created)


def hold_job_row(pg_url: str, job_id: int) -> psycopg.Connection:
    """Another session holding the job's row lock, as a committing worker would."""
    holder = psycopg.connect(pg_url)
    holder.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", [job_id])
    return holder


def disabled_as_not_found(store: Store, clock: FakeClock, item_id: str) -> int:
    store.register_tasks([task(retries=0)])
    store.add_items([item(item_id, "product")])
    job = claim_one(store)
    gone = structs.replace(failure(job, "gone", retries=0), not_found=True, retry_delay=None)
    commit_one(store, gone)
    clock.advance(60)
    return job.job_id


SHORT_LOCK_WAIT = "?options=-c%20lock_timeout%3D200ms"


class _Said(logging.Handler):
    """Sets its event once a record starting with *text* is logged."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.INFO)
        self.text = text
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.text):
            self.event.set()


def test_a_batch_that_waits_too_long_for_a_lock_is_tried_again(
    pg_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trawl.store.staging")
    with Store(pg_url + SHORT_LOCK_WAIT, clock=clock) as store:
        job_id = disabled_as_not_found(store, clock, "sku:0")
        holder = hold_job_row(pg_url, job_id)
        # The row is let go once a batch has lost its wait for it and said so, not after a
        # set time: a loaded machine took longer than that to reach the row, which was free
        # by then, and nothing was tried again.
        retried = _Said("adding items again after a conflict")
        logging.getLogger("trawl.store.staging").addHandler(retried)

        def release() -> None:
            retried.event.wait(60)
            holder.close()  # its transaction ends with it

        releaser = threading.Thread(target=release)
        releaser.start()
        try:
            items = [item("sku:0", "product"), *(item(f"n:{n}", "product") for n in range(20))]
            made = stage_and_write(store, items, 5, writers=2)
        finally:
            retried.event.set()
            releaser.join()
            logging.getLogger("trawl.store.staging").removeHandler(retried)
        assert sum(made) == 20
        assert job_of(store, "sku:0").due_at == clock.now  # listed again, once released
    assert "adding items again after a conflict" in caplog.text


def test_a_batch_that_keeps_losing_stops_every_writer_and_is_raised(
    pg_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(staging, "RETRIES", 2)
    monkeypatch.setattr(staging, "RETRY_WAIT", 0.01)
    with Store(pg_url + SHORT_LOCK_WAIT, clock=clock) as store:
        job_id = disabled_as_not_found(store, clock, "sku:0")
        seq = last_seq(store)
        holder = hold_job_row(pg_url, job_id)
        try:
            items = [item("sku:0", "product"), *(item(f"n:{n}", "product") for n in range(200))]
            with pytest.raises(TransientConflict, match="55P03"):
                stage_and_write(store, items, 5, writers=2)
        finally:
            holder.close()
        assert not [t for t in threading.enumerate() if t.name.startswith("trawl-add-")]
        # what committed before the failure stays, whole: each created item has its
        # alias, its job and its journal row
        created = [e.item_id for e in store.journal(seq, limit=1000)]
        assert len(created) < 200
        for item_id in created:
            assert item_id is not None
            assert job_of(store, item_id).status == "queued"
        # the stage is gone: the same file can be added again, and finishes the work
        assert sum(stage_and_write(store, items, 5, writers=2)) == 200 - len(created)


def test_a_writer_the_server_refuses_a_connection_says_so_and_stages_nothing(
    pg_url: str, clock: FakeClock
) -> None:
    with (
        database_user(pg_url, "one_conn", options="CONNECTION LIMIT 1") as url,
        Store(url, clock=clock) as store,
    ):
        with pytest.raises(
            DatabaseUnavailable,
            match="writer 2 of 2: each writer needs a connection of its own",
        ):
            stage_and_write(store, [item("r:1")], 10, writers=2)
        assert store.get_item("r:1") is None
        # the store's own connection still works, and one writer is enough
        assert stage_and_write(store, [item("r:1")], 10, writers=1) == [1]
