"""trawl vacuums the tables that churn, crawl slots and hosts (store/vacuum.py).

The test server runs without autovacuum: nothing but trawl vacuums these databases. The
activity statistics that count dead rows reach the server from a backend about every
second: the tests flush them and wait for them.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import sqlalchemy as sa

from tests.integration.helpers import database_user, item, product_app
from trawl.runtime import backend as backend_module
from trawl.runtime import worker as worker_module
from trawl.runtime.worker import Worker
from trawl.server.stores import Stores
from trawl.server.upkeep import Upkeep
from trawl.store import vacuum
from trawl.store.store import Store

pytestmark = pytest.mark.postgres

WAIT = 20.0  # seconds for the activity statistics to show a change


def _stat(url: str, table: str, column: str) -> int:
    with Store(url) as store:
        sql = f"SELECT {column} FROM pg_stat_user_tables WHERE relname = :t"
        return int(store.db.execute(sa.text(sql), {"t": table}).scalar_one())


def _churn(url: str, rows: int, *, keep: int = 0) -> None:
    """What fetches do to ``crawl_slots``: *rows* slots taken and released, *keep* held."""
    with Store(url) as store:
        taken = (
            "INSERT INTO crawl_slots (key, item_id, attempt, until)"
            " SELECT 'crawl:1', 'page:' || n, 1, 0 FROM generate_series(1, :n) AS n"
        )
        store.db.execute(sa.text(taken), {"n": rows})
        released = "DELETE FROM crawl_slots WHERE CAST(substr(item_id, 6) AS int) > :keep"
        store.db.execute(sa.text(released), {"keep": keep})
        # Report this backend's counts now rather than when it next goes idle for a while.
        store.db.execute(sa.text("SELECT pg_stat_force_next_flush()"))
        store.db.execute(sa.text("SELECT 1"))


def _until_dead(url: str, rows: int) -> None:
    deadline = time.monotonic() + WAIT
    while _stat(url, "crawl_slots", "n_dead_tup") < rows:
        assert time.monotonic() < deadline, f"the statistics never showed {rows} dead rows"
        time.sleep(0.2)


def test_a_churned_table_is_vacuumed_once_until_it_fills_again(pg_url: str) -> None:
    _churn(pg_url, 1500)
    _until_dead(pg_url, 1500)
    with Store(pg_url) as store:
        assert store.crowded_tables() == ["crawl_slots"]  # hosts: nothing written there
        store.vacuum(store.crowded_tables())
        assert store.crowded_tables() == []
    assert _stat(pg_url, "crawl_slots", "vacuum_count") == 1
    assert _stat(pg_url, "crawl_slots", "n_dead_tup") == 0
    _churn(pg_url, 1200)
    _until_dead(pg_url, 1200)
    with Store(pg_url) as store:
        assert store.crowded_tables() == ["crawl_slots"]


def test_a_few_dead_rows_or_fewer_than_the_live_ones_are_left_alone(pg_url: str) -> None:
    _churn(pg_url, vacuum.FLOOR - 100)
    _until_dead(pg_url, vacuum.FLOOR - 100)
    with Store(pg_url) as store:
        assert store.crowded_tables() == []
    # Past the floor, but the table holds more live rows than dead ones (a crawl of many
    # hosts has a big host table: a VACUUM of it is worth it once half of it is dead).
    _churn(pg_url, 4000, keep=2600)  # 900 + 1,400 dead, 2,600 live
    _until_dead(pg_url, vacuum.FLOOR - 100 + 1400)
    with Store(pg_url) as store:
        assert _stat(pg_url, "crawl_slots", "n_dead_tup") >= vacuum.FLOOR
        assert store.crowded_tables() == []


def test_only_the_churning_tables_are_vacuumed(pg_url: str) -> None:
    with Store(pg_url) as store, pytest.raises(ValueError, match="not tables trawl vacuums: jobs"):
        store.vacuum(["crawl_slots", "jobs"])


def test_a_vacuum_inside_a_transaction_is_refused_before_it_is_sent(pg_url: str) -> None:
    refused = pytest.raises(RuntimeError, match="VACUUM cannot run inside a transaction")
    with Store(pg_url) as store, refused, store.db.write():
        store.vacuum(["crawl_slots"])
    assert _stat(pg_url, "crawl_slots", "vacuum_count") == 0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sqlite_has_nothing_to_vacuum(db_url: str) -> None:
    with Store(db_url) as store:
        assert store.crowded_tables() == []
        store.vacuum(["crawl_slots"])  # nothing to do, nothing sent


def test_a_database_user_that_may_not_vacuum_leaves_the_tables_alone(pg_url: str) -> None:
    """A user owning neither the tables nor the database would have VACUUM skip them with a
    warning, and find them crowded again at every look: it does not try."""
    _churn(pg_url, 1500)
    _until_dead(pg_url, 1500)
    with database_user(pg_url, "no_vacuum") as url, Store(url) as store:
        assert store.crowded_tables() == []
    with Store(pg_url) as owner:
        assert owner.crowded_tables() == ["crawl_slots"]


def test_a_worker_vacuums_on_a_connection_of_its_own(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VACUUM of a big crawl's host table takes a while: on the lease connection it would
    hold up renewals, on a lane commits and claims."""
    threads: list[str] = []
    real = backend_module.vacuum_apart

    def watched(url: str, tables: list[str]) -> None:
        threads.append(threading.current_thread().name)
        real(url, tables)

    monkeypatch.setattr(worker_module, "UPKEEP_EVERY", 0.1)
    monkeypatch.setattr(backend_module, "vacuum_apart", watched)
    _churn(pg_url, 1500)
    _until_dead(pg_url, 1500)
    with Store(pg_url) as store:
        store.add_items([item(f"sku:{n}", "product") for n in range(40)])
    worker = Worker(product_app(), url=pg_url, concurrency=4, exit_when_idle=True, grace=5)
    assert asyncio.run(worker.run()) == 0
    assert threads, "the worker never vacuumed"
    assert not [name for name in threads if name.startswith("trawl-db")], threads
    assert _stat(pg_url, "crawl_slots", "vacuum_count") >= 1


def test_the_api_server_vacuums_as_a_worker_does(pg_url: str) -> None:
    """Remote pipelines take and release their slots through the server."""
    _churn(pg_url, 1500)
    _until_dead(pg_url, 1500)

    async def serve() -> None:
        stores = Stores(pg_url, 1)
        upkeep = Upkeep(stores, every=0.05)
        upkeep.start()
        try:
            deadline = time.monotonic() + WAIT
            while await asyncio.to_thread(_stat, pg_url, "crawl_slots", "vacuum_count") == 0:
                assert time.monotonic() < deadline, "the server never vacuumed crawl_slots"
                await asyncio.sleep(0.05)
        finally:
            await upkeep.stop()
            stores.close()

    asyncio.run(serve())
