"""PostgreSQL's planner statistics follow the tables' growth (store/planner_stats.py).

The test server runs without autovacuum, as a fresh or neglected server may: nothing but
trawl analyzes these databases. The activity statistics that say how much a table changed
reach the server from a backend every second or so: the tests wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from tests.integration.helpers import database_user, item, product_app
from trawl.model.errors import DatabaseUnavailable
from trawl.runtime import backend as backend_module
from trawl.runtime import worker as worker_module
from trawl.runtime.backend import LocalBackend
from trawl.runtime.worker import Worker
from trawl.server import upkeep as upkeep_module
from trawl.server.stores import Stores
from trawl.server.upkeep import Upkeep
from trawl.store import planner_stats
from trawl.store.store import Store

pytestmark = pytest.mark.postgres

WAIT = 20.0  # seconds for the activity statistics to show a change


def _changed(url: str, table: str) -> int:
    """Rows written to *table* since its last ANALYZE, as the server's statistics say."""
    with Store(url) as store:
        sql = "SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = :t"
        return int(store.db.execute(sa.text(sql), {"t": table}).scalar_one())


def _analyzed(url: str, table: str) -> int:
    with Store(url) as store:
        sql = "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = :t"
        return int(store.db.execute(sa.text(sql), {"t": table}).scalar_one())


def _add(url: str, count: int, start: int = 0) -> None:
    with Store(url) as store:
        store.add_items([item(f"sku:{n}", "product") for n in range(start, start + count)])
        # Report this backend's counts now rather than when it next goes idle for a while.
        store.db.execute(sa.text("SELECT pg_stat_force_next_flush()"))
        store.db.execute(sa.text("SELECT 1"))


def _until_counted(url: str, table: str, rows: int) -> None:
    deadline = time.monotonic() + WAIT
    while _changed(url, table) < rows:
        assert time.monotonic() < deadline, f"the statistics never showed {rows} rows in {table}"
        time.sleep(0.2)


def _refresh(store: Store) -> list[str]:
    """What a worker's and the server's upkeep do (on two connections there): analyze the
    stale tables; their names."""
    stale = store.stale_statistics()
    store.analyze(stale)
    return stale


def test_a_table_that_grew_is_analyzed_once_until_it_grows_again(pg_url: str) -> None:
    _add(pg_url, 1500)
    _until_counted(pg_url, "items", 1500)
    with Store(pg_url) as store:
        stale = planner_stats.stale(store.db)
        assert {"items", "tags", "aliases"} <= set(stale)
        assert "crawls" not in stale  # nothing written there
        assert _refresh(store) == stale
        assert "items" not in planner_stats.stale(store.db)
    assert _analyzed(pg_url, "items") == 1
    # Analyzed at 1,500 rows: 1,000 more (at least FLOOR, but under the 1,500 it had) is
    # not yet worth a new look; 1,500 more is.
    _add(pg_url, 1000, start=1500)
    _until_counted(pg_url, "items", 1000)
    with Store(pg_url) as store:
        assert "items" not in _refresh(store)
    _add(pg_url, 500, start=2500)
    _until_counted(pg_url, "items", 1500)
    with Store(pg_url) as store:
        assert "items" in _refresh(store)
    assert _analyzed(pg_url, "items") == 2


def test_a_small_change_is_not_worth_an_analyze(pg_url: str) -> None:
    _add(pg_url, 50)
    _until_counted(pg_url, "items", 50)
    with Store(pg_url) as store:
        assert _refresh(store) == []
    assert _analyzed(pg_url, "items") == 0


def test_an_analyze_replaces_the_plan_a_statement_cached_on_a_small_table(pg_url: str) -> None:
    """The trap the module is for: a prepared statement planned while ``tags`` was small
    scans the whole table on every use, however big it has grown, until an ANALYZE."""
    # The SELECT of the statement that makes new items' jobs (store/bulk.py).
    lookup = (
        "SELECT DISTINCT t.item_id, tt.task FROM tags t JOIN task_tags tt ON tt.tag = t.name"
        " JOIN tasks k ON k.name = tt.task WHERE t.item_id = ANY($1::text[])"
    )
    with Store(pg_url) as store:
        store.register_tasks(d.info() for d in product_app().declared())
    dsn = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        # The plan is made on first use and kept: what a driver's prepared statement gets
        # once the server settles on a generic plan.
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE lookup(text[]) AS {lookup}")
        _add(pg_url, 300)
        conn.execute("EXECUTE lookup(ARRAY['sku:1'])")
        _add(pg_url, 20_000, start=300)
        _until_counted(pg_url, "tags", 20_300)

        def plan() -> str:
            rows = conn.execute("EXPLAIN EXECUTE lookup(ARRAY['sku:1', 'sku:2'])").fetchall()
            return "\n".join(str(row[0]) for row in rows)

        assert "Seq Scan on tags" in plan(), plan()
        with Store(pg_url) as store:
            assert "tags" in _refresh(store)
        assert "Seq Scan" not in plan(), plan()
        assert "tags_pkey" in plan()


def test_only_trawl_tables_are_analyzed(pg_url: str) -> None:
    with Store(pg_url) as store, pytest.raises(ValueError, match="not trawl tables: pg_class"):
        planner_stats.analyze(store.db, ["items", "pg_class"])


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sqlite_has_nothing_to_refresh(db_url: str) -> None:
    with Store(db_url) as store:
        store.add_items([item(f"sku:{n}", "product") for n in range(1500)])
        assert planner_stats.stale(store.db) == []
        assert _refresh(store) == []


def test_a_worker_keeps_the_statistics_up(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "UPKEEP_EVERY", 0.1)
    _add(pg_url, 1500)
    _until_counted(pg_url, "items", 1500)
    worker = Worker(product_app(), url=pg_url, concurrency=4, exit_when_idle=True, grace=5)
    assert asyncio.run(worker.run()) == 0
    assert worker.stats.done == 1500
    assert _analyzed(pg_url, "items") == 1
    assert _analyzed(pg_url, "jobs") >= 1


def test_a_workers_analyze_has_a_connection_of_its_own(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ANALYZE of big tables takes seconds: on the lease connection it would hold up
    renewals (and leases could lapse), on a lane it would hold up commits and claims."""
    threads: list[str] = []

    def slow_analyze(url: str, tables: list[str]) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(0.3)

    monkeypatch.setattr(worker_module, "UPKEEP_EVERY", 0.1)
    monkeypatch.setattr(backend_module, "analyze_apart", slow_analyze)
    _add(pg_url, 1500)
    _until_counted(pg_url, "items", 1500)
    worker = Worker(product_app(), url=pg_url, concurrency=4, exit_when_idle=True, grace=5)
    assert asyncio.run(worker.run()) == 0
    assert threads
    assert not [name for name in threads if name.startswith("trawl-db")], threads


def test_a_failing_upkeep_is_logged_and_the_work_goes_on(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[float] = []

    async def broken(self: LocalBackend) -> None:
        calls.append(time.monotonic())
        raise RuntimeError("the statistics view is gone")

    monkeypatch.setattr(worker_module, "UPKEEP_EVERY", 0.05)
    monkeypatch.setattr(LocalBackend, "upkeep", broken)
    _add(pg_url, 60)
    worker = Worker(product_app(), url=pg_url, concurrency=1, exit_when_idle=True, grace=5)
    with caplog.at_level(logging.WARNING, logger="trawl.worker"):
        assert asyncio.run(worker.run()) == 0
    assert worker.stats.done == 60
    assert len(calls) >= 2  # tried again after the first failure
    failed = [r for r in caplog.records if r.getMessage().startswith("upkeep failed")]
    assert failed
    assert "the statistics view is gone" in (failed[0].exc_text or "")


def test_the_api_server_keeps_the_statistics_up(pg_url: str) -> None:
    """Remote pipelines write through the server: it analyzes as a worker does."""
    _add(pg_url, 1500)
    _until_counted(pg_url, "items", 1500)

    async def serve() -> None:
        async with _serving(pg_url, pool=2, every=0.05):
            await _until_analyzed(pg_url, "items", "the server never analyzed items")

    asyncio.run(serve())


def test_the_api_servers_analyze_holds_no_connection_of_its_pool(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ANALYZE of big tables takes seconds: on a connection of the pool it would keep a
    request waiting for it (here the pool has one)."""
    analyzing, release = threading.Event(), threading.Event()
    real = planner_stats.analyze

    def slow_analyze(db: Any, tables: list[str]) -> None:
        analyzing.set()
        release.wait(WAIT)
        real(db, tables)

    monkeypatch.setattr(planner_stats, "analyze", slow_analyze)
    _add(pg_url, 1500)
    _until_counted(pg_url, "items", 1500)

    async def serve() -> float:
        async with _serving(pg_url, pool=1, every=0.05) as stores:
            try:
                assert await asyncio.to_thread(analyzing.wait, WAIT), "it never analyzed"
                started = time.monotonic()
                await asyncio.wait_for(stores.run(lambda s: s.stale_statistics()), WAIT)
                answered = time.monotonic() - started
            finally:
                release.set()  # (else the held thread outlives the test's event loop)
            await _until_analyzed(pg_url, "items", "the held ANALYZE never ran")
            return answered

    assert asyncio.run(serve()) < 2.0  # the request did not wait for the ANALYZE (WAIT)


def test_the_api_server_logs_an_analyze_that_fails_on_its_connection_and_goes_on(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The ANALYZE's own connection (refused, or lost mid-statement) is said and tried again
    at the next look; the pool's connections are not touched by it."""
    calls: list[list[str]] = []
    second = threading.Event()

    def failing(url: str, tables: list[str]) -> None:
        calls.append(tables)
        if len(calls) == 2:
            second.set()
        raise RuntimeError("the connection for ANALYZE was refused")

    monkeypatch.setattr(upkeep_module, "analyze_apart", failing)
    _add(pg_url, 1500)
    _until_counted(pg_url, "items", 1500)

    async def serve() -> list[str]:
        async with _serving(pg_url, pool=1, every=0.02) as stores:
            assert await asyncio.to_thread(second.wait, WAIT), "the upkeep did not try again"
            return await asyncio.wait_for(stores.run(lambda s: s.stale_statistics()), WAIT)

    with caplog.at_level(logging.WARNING, logger="trawl.server"):
        still_stale = asyncio.run(serve())
    assert "items" in calls[0]
    assert "items" in still_stale  # nothing was analyzed
    failed = [r for r in caplog.records if r.getMessage().startswith("upkeep failed")]
    assert len(failed) >= 2
    assert "the connection for ANALYZE was refused" in (failed[0].exc_text or "")


@contextlib.asynccontextmanager
async def _serving(url: str, *, pool: int, every: float) -> AsyncIterator[Stores]:
    """An API server's pool of *pool* connections, its upkeep looking every *every* s."""
    stores = Stores(url, pool)
    upkeep = Upkeep(stores, every=every)
    upkeep.start()
    try:
        yield stores
    finally:
        await upkeep.stop()
        stores.close()


async def _until_analyzed(url: str, table: str, never: str) -> None:
    deadline = time.monotonic() + WAIT
    while await asyncio.to_thread(_analyzed, url, table) == 0:
        assert time.monotonic() < deadline, never
        await asyncio.sleep(0.05)


def _upkeep_failing_thrice(pg_url: str, error: Exception) -> list[float]:
    """The API server's upkeep on a pool whose every call raises *error*, run until it
    tried three times; when each try was made."""
    calls: list[float] = []
    third = asyncio.Event()

    class Failing(Stores):
        async def run(self, fn: Any) -> Any:
            calls.append(time.monotonic())
            if len(calls) == 3:
                third.set()
            raise error

    async def serve() -> None:
        upkeep = Upkeep(Failing(pg_url, 1), every=0.02)
        upkeep.start()
        await asyncio.wait_for(third.wait(), WAIT)
        await upkeep.stop()

    asyncio.run(serve())
    return calls


def test_the_api_server_logs_a_failing_upkeep_and_goes_on(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="trawl.server"):
        _upkeep_failing_thrice(pg_url, RuntimeError("the statistics view is gone"))
    failed = [r for r in caplog.records if r.getMessage().startswith("upkeep failed")]
    assert len(failed) >= 2
    assert "the statistics view is gone" in (failed[0].exc_text or "")


def test_a_worker_whose_database_is_away_skips_its_upkeep_quietly(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The claim and commit loops already say the database is away: the upkeep only notes
    it at debug level and looks again next time."""
    calls: list[float] = []

    async def away(self: LocalBackend) -> None:
        calls.append(time.monotonic())
        raise DatabaseUnavailable("the server went away")

    monkeypatch.setattr(worker_module, "UPKEEP_EVERY", 0.05)
    monkeypatch.setattr(LocalBackend, "upkeep", away)
    _add(pg_url, 60)
    worker = Worker(product_app(), url=pg_url, concurrency=1, exit_when_idle=True, grace=5)
    with caplog.at_level(logging.DEBUG, logger="trawl.worker"):
        assert asyncio.run(worker.run()) == 0
    assert worker.stats.done == 60
    assert len(calls) >= 2
    ours = [r for r in caplog.records if r.getMessage().startswith("upkeep")]
    assert ours
    assert {r.levelno for r in ours} == {logging.DEBUG}
    assert "upkeep skipped: the server went away" in ours[0].getMessage()


def test_an_api_server_whose_database_is_away_skips_its_upkeep_quietly(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="trawl.server"):
        _upkeep_failing_thrice(pg_url, DatabaseUnavailable("the server went away"))
    ours = [r for r in caplog.records if r.getMessage().startswith("upkeep")]
    assert len(ours) >= 2
    assert {r.levelno for r in ours} == {logging.DEBUG}
    assert "upkeep skipped: the server went away" in ours[0].getMessage()


def test_a_database_user_that_may_not_analyze_leaves_the_tables_alone(pg_url: str) -> None:
    """A user owning neither the tables nor the database would have ANALYZE skip them with a
    warning, and find them stale again at every look: it does not try."""
    with database_user(pg_url, "no_owner") as url:
        _add(url, 1500)
        _until_counted(pg_url, "items", 1500)
        with Store(url) as store:
            assert store.stale_statistics() == []
            assert _refresh(store) == []
        assert _analyzed(pg_url, "items") == 0
        with Store(pg_url) as owner:  # the tables' owner still sees them stale
            assert "items" in owner.stale_statistics()


@pytest.mark.parametrize(
    "look",
    [
        lambda store: store.stale_statistics(),
        lambda store: store.analyze(["items"]),
        lambda store: store.crowded_tables(),
        lambda store: store.vacuum(["crawl_slots"]),
    ],
    ids=["stale", "analyze", "crowded", "vacuum"],
)
def test_an_upkeep_statement_whose_connection_is_cut_is_an_outage(
    pg_url: str, look: Callable[[Store], object]
) -> None:
    """They run outside a transaction: a server gone mid-way must read as an outage (which
    the upkeep notes quietly), not as a driver error logged with its traceback, and the
    next look must find the server on a new connection."""
    with Store(pg_url) as store:
        pid = store.db.execute(sa.text("SELECT pg_backend_pid()")).scalar()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(DatabaseUnavailable):
            look(store)
        look(store)  # a new connection
