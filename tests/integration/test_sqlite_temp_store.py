"""A worker's SQLite connections keep their statement journals in memory (each of their
statements writes one batch), not in a file created and deleted every transaction; task
registration, whose statements may change every job of a task, asks for the file again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa

from tests.integration.helpers import task
from trawl.model.errors import DatabaseUnavailable
from trawl.runtime.backend import LocalBackend, LocalLane
from trawl.runtime.clock import WorkerClock
from trawl.store.connection import Database
from trawl.store.store import Store

TEMP_STORE = sa.text("PRAGMA temp_store")
DEFAULT, FILE, MEMORY = 0, 1, 2


def traced(db: Database) -> list[str]:
    """The statements SQLite runs on *db*'s connection from now on."""
    statements: list[str] = []
    db.conn.connection.dbapi_connection.set_trace_callback(statements.append)  # type: ignore[union-attr]
    return statements


def test_a_connection_asked_for_it_keeps_temporary_storage_in_memory(sqlite_url: str) -> None:
    with Store(sqlite_url, temp_in_memory=True) as lane, Store(sqlite_url) as other:
        assert lane.db.execute(TEMP_STORE).scalar_one() == MEMORY
        assert other.db.execute(TEMP_STORE).scalar_one() == DEFAULT


def test_task_registration_puts_statement_journals_in_files_for_its_transaction(
    sqlite_url: str,
) -> None:
    with Store(sqlite_url, temp_in_memory=True) as store:
        statements = traced(store.db)
        store.register_tasks([task("price", ("product",))])
        assert store.db.execute(TEMP_STORE).scalar_one() == MEMORY
    pragmas = [s for s in statements if s.startswith(("PRAGMA temp_store", "BEGIN", "COMMIT"))]
    assert pragmas[:4] == [
        "PRAGMA temp_store=FILE",
        "BEGIN IMMEDIATE",
        "COMMIT",
        "PRAGMA temp_store=MEMORY",
    ]


def test_temporary_storage_goes_back_to_memory_when_the_block_fails(sqlite_url: str) -> None:
    def fail_on_disk(store: Store) -> None:
        with store.db.temp_on_disk():
            assert store.db.execute(TEMP_STORE).scalar_one() == FILE
            raise ValueError("boom")

    with Store(sqlite_url, temp_in_memory=True) as store:
        with pytest.raises(ValueError, match="boom"):
            fail_on_disk(store)
        assert store.db.execute(TEMP_STORE).scalar_one() == MEMORY


def test_a_connection_lost_in_the_block_leaves_the_place_to_the_next_one(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable() -> Any:
        raise DatabaseUnavailable("cannot reach the database: gone")

    with Store(sqlite_url, temp_in_memory=True) as store:
        with monkeypatch.context() as patch, store.db.temp_on_disk():
            store.db.reset()  # the connection dropped mid-block, and none can be had now
            patch.setattr(store.db, "_connect", unreachable)
        # The block ended without the restore's failure; a new connection sets its own.
        assert store.db.execute(TEMP_STORE).scalar_one() == MEMORY


def test_inside_a_transaction_the_place_is_not_changed(sqlite_url: str) -> None:
    # SQLite chose where this transaction's statement journals go at its BEGIN.
    with Store(sqlite_url, temp_in_memory=True) as store, store.db.write():
        statements = traced(store.db)
        with store.db.temp_on_disk():
            pass
        assert not [s for s in statements if s.startswith("PRAGMA")]


def test_a_connection_not_asked_for_it_runs_no_pragma(sqlite_url: str) -> None:
    with Store(sqlite_url) as store:
        statements = traced(store.db)
        with store.db.temp_on_disk():
            pass
        assert statements == []


@pytest.mark.postgres
def test_postgresql_ignores_it(pg_url: str) -> None:
    with Store(pg_url, temp_in_memory=True) as store:
        assert not store.db.temp_in_memory
        with store.db.temp_on_disk():
            assert store.db.execute(sa.text("SELECT 1")).scalar_one() == 1


def test_every_claim_and_commit_lane_of_a_worker_keeps_them_in_memory(sqlite_url: str) -> None:
    def no_claim(*_: Any) -> Any:
        raise AssertionError("nothing is claimed here")

    backend = LocalBackend(
        sqlite_url, owner="w1", clock=WorkerClock(), claim=no_claim, tasks=[], connections=2
    )
    try:
        lanes = backend.lanes()
        assert len(lanes) == 2
        for lane in lanes:
            assert isinstance(lane, LocalLane)
            store = lane.thread.store
            assert store.db.execute(TEMP_STORE).scalar_one() == MEMORY
    finally:
        asyncio.run(backend.close())
