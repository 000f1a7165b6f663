"""Journal writers do not wait for one another; readers read up to the settled horizon.

On PostgreSQL two transactions can take journal seqs in one order and commit in the other.
A transaction that writes journal rows holds the journal's advisory lock *shared* from its
journal insert to its end, so writers commit side by side; a reader takes the lock
exclusively for an instant (``Database.journal_horizon``) and reads only up to the last seq
committed then: every seq handed out so far is committed or rolled back for good. So a reader
following the journal from a cursor never passes an entry that commits later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from tests.integration.helpers import database_user
from trawl.model.errors import TransientConflict
from trawl.store.connection import JOURNAL_LOCK
from trawl.store.store import Store

pytestmark = pytest.mark.postgres

# Long enough that a reader which should wait has clearly not returned: a wrongly unblocked
# one returns in milliseconds.
BLOCKED = 0.5


def _row(kind: str) -> dict[str, Any]:
    return {"at": 1.0, "kind": kind, "item_id": None, "task": None, "detail": None}


def _write(store: Store, kind: str) -> None:
    with store.db.write():
        store.journal_many([_row(kind)])


def _dsn(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
def pending(pg_url: str) -> Iterator[Callable[[str], int]]:
    """A writer that takes a journal seq the way trawl's writers do (the shared lock, then
    the insert) and stays in its transaction until the test commits it (``.commit()``)."""
    conn = psycopg.connect(_dsn(pg_url))

    def take(kind: str) -> int:
        conn.execute(f"SELECT pg_advisory_xact_lock_shared({JOURNAL_LOCK})")
        found = conn.execute(
            "INSERT INTO journal (at, kind) VALUES (1.0, %s) RETURNING seq", [kind]
        ).fetchone()
        assert found is not None
        return int(found[0])

    take.commit = conn.commit  # type: ignore[attr-defined]
    try:
        yield take
    finally:
        conn.close()


@pytest.fixture
def other(pg_url: str) -> Iterator[Store]:
    with Store(pg_url) as opened:
        yield opened


def _in_thread(call: Callable[[], Any]) -> Future[Any]:
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(call)
    pool.shutdown(wait=False)
    return future


def test_a_writer_does_not_wait_for_another_writers_commit(
    pending: Callable[[str], int], other: Store
) -> None:
    first = pending("first")
    done = _in_thread(lambda: _write(other, "second"))
    done.result(timeout=10)  # with an exclusive lock it waits for "first" (lock_timeout)
    kinds = {e.kind: e.seq for e in _all(pending, other)}
    assert kinds["second"] > first


def _all(pending: Callable[[str], int], store: Store) -> list[Any]:
    pending.commit()  # type: ignore[attr-defined]
    return store.journal(0)


def test_a_reader_waits_for_a_seq_below_what_it_sees(
    pending: Callable[[str], int], other: Store, pg_url: str
) -> None:
    """ "second" is committed and visible, but "first" holds a lower seq and has not
    committed: a reader handing out "second"'s seq as its cursor would never see "first"."""
    first = pending("first")
    _write(other, "second")
    with Store(pg_url) as reader:
        read = _in_thread(lambda: reader.journal(0))
        time.sleep(BLOCKED)
        assert not read.done(), "the reader returned while a lower seq was unsettled"
        pending.commit()  # type: ignore[attr-defined]
        entries = read.result(timeout=10)
    assert [e.kind for e in entries] == ["first", "second"]
    assert entries[0].seq == first


def test_a_rolled_back_seq_does_not_hold_readers_back(pg_url: str, other: Store) -> None:
    conn = psycopg.connect(_dsn(pg_url))
    try:
        conn.execute(f"SELECT pg_advisory_xact_lock_shared({JOURNAL_LOCK})")
        conn.execute("INSERT INTO journal (at, kind) VALUES (1.0, 'undone')")
        conn.rollback()
    finally:
        conn.close()
    _write(other, "kept")
    assert [e.kind for e in other.journal(0)] == ["kept"]
    assert other.db.journal_horizon() == other.journal(0)[-1].seq


def test_inside_a_transaction_the_lock_is_not_kept(other: Store, pg_url: str) -> None:
    """The dashboard reads the horizon inside a read transaction: the lock it takes there
    must be gone at once, or every writer would wait for that transaction to end."""
    store = other
    _write(store, "one")
    with store.read():
        horizon = store.activity.last_seq()
        with psycopg.connect(_dsn(pg_url)) as watcher:
            # pg_locks is the whole server's: other tests' writers, in databases of their
            # own, hold the same advisory lock (shared) at any moment.
            held = watcher.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND objid = %s"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                [JOURNAL_LOCK & 0xFFFF_FFFF],
            ).fetchone()
        # and a writer gets through meanwhile
        with Store(pg_url) as writer:
            _write(writer, "two")
    assert held == (0,)
    assert horizon == store.journal(0)[0].seq


def test_a_consumer_starting_at_the_end_misses_nothing_committed_later(
    pending: Callable[[str], int], other: Store
) -> None:
    pending("late")
    _write(other, "early")
    position = _in_thread(lambda: other.consumers.position("tail", 1.0, start="end"))
    time.sleep(BLOCKED)
    assert not position.done()
    pending.commit()  # type: ignore[attr-defined]
    start = position.result(timeout=10)
    _write(other, "next")
    assert [e.kind for e in other.journal(start)] == ["next"]


def test_followers_see_every_entry_once_in_order_while_writers_race(pg_url: str) -> None:
    """Four writers commit as fast as they can; two followers read from their cursors all
    along. At the end each follower has seen every entry the table holds, in seq order."""
    stop = threading.Event()
    # A writer may be inside a write when it is told to stop: the followers' last round
    # waits for the writers to have finished, or it may end before that write commits.
    written = threading.Event()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with Store(pg_url) as store:
                while not stop.is_set():
                    _write(store, f"w{n}")
        except BaseException as error:  # reported below
            errors.append(error)

    def follower(seen: list[int]) -> None:
        try:
            with Store(pg_url) as store:
                cursor = 0
                while True:
                    last_round = written.is_set()
                    for entry in store.journal(cursor, 500):
                        seen.append(entry.seq)
                        cursor = entry.seq
                    if last_round and not store.journal(cursor, 1):
                        return
        except BaseException as error:
            errors.append(error)

    views: list[list[int]] = [[], []]
    writers = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    followers = [threading.Thread(target=follower, args=(v,)) for v in views]
    for thread in writers + followers:
        thread.start()
    time.sleep(2.0)
    stop.set()
    for thread in writers:
        thread.join(timeout=60)
    written.set()
    for thread in followers:
        thread.join(timeout=60)
    assert not errors, errors
    with Store(pg_url) as store:
        every = [e.seq for e in store.journal(0, 1_000_000)]
    assert len(every) > 100  # the writers did race
    for seen in views:
        assert seen == every


def test_a_reader_that_waits_past_lock_timeout_fails_and_holds_nothing(
    pending: Callable[[str], int], other: Store, pg_url: str
) -> None:
    """A writer stuck between its journal insert and its COMMIT: the reader waits no longer
    than its lock_timeout, says so, and leaves no lock behind for the writers."""
    pending("stuck")
    with Store(pg_url) as reader:
        reader.db.execute(sa.text("SET lock_timeout = '200ms'"))
        with pytest.raises(TransientConflict):
            reader.journal(0)
        done = _in_thread(lambda: _write(other, "after"))
        done.result(timeout=10)  # a writer gets through: the reader's request is gone
        pending.commit()  # type: ignore[attr-defined]
        assert [e.kind for e in reader.journal(0)] == ["stuck", "after"]


def test_a_role_without_rights_on_sequences_reads_the_journal(pg_url: str, other: Store) -> None:
    """Reading the horizon needs only SELECT on the journal: a role that reads, granted no
    right on any sequence (or only USAGE, as many deployments grant), follows it too."""
    _write(other, "seen")
    revoke = "REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM reader_{database}"
    with database_user(pg_url, "reader", setup=[revoke]) as url, Store(url) as reader:
        assert [e.kind for e in reader.journal(0)] == ["seen"]
        start = reader.consumers.position("reader", 1.0, start="end")
        _write(other, "next")
        assert [e.kind for e in reader.journal(start)] == ["next"]
