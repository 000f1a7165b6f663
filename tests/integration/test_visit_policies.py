"""Visit policies at scale: each pool is read over the whole due set, so a large never-run
backlog does not crowd out the lagging and oldest-due shares (issue 19).

100,000 never-run jobs, 10,000 re-runs whose source changed after our last result (each
with a different lag) and 5,000 plain overdue re-runs: claims of 1,000 at a time take
40 % / 40 % / 20 % of them, within 5 points, on both backends.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests.support import pg
from trawl.engine.claim import TaskGate, claim
from trawl.store import pools
from trawl.store.store import Store

NOW = 1_700_000_000.0
NEVER_RUN = 100_000
LAGGING = 10_000
OVERDUE = 5_000
BATCH = 1_000
ROUNDS = 5
pg_only = pytest.mark.postgres

_SERIES = {
    "postgresql": "SELECT g FROM generate_series(1, :n) AS g",
    "sqlite": "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < :n) "
    "SELECT g FROM s",
}
_ITEMS = """
    INSERT INTO items (id, data, created_at, updated_at, last_update)
    SELECT :prefix || g, '{{}}', :now, :now, {last_update} FROM ({series}) AS n
"""
# Never-run jobs were due most recently: a claim sorted never-run first would take only them.
_JOBS = """
    INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,
                      selected, fail_count, result_at, source_update)
    SELECT :prefix || g, 'visit', :status, {due_at}, true, :attempt, 0, :ever_run, true, 0,
           {result_at}, {last_update}
    FROM ({series}) AS n
"""
# (prefix, rows, status, ever_run, due_at, result_at, last_update): a lagging job's source
# changed g seconds after our last result; overdue re-runs are older than everything else.
_KINDS = [
    ("new:", NEVER_RUN, "queued", False, ":now - g", "NULL", "NULL"),
    ("lag:", LAGGING, "done", True, ":now - 100 - g", ":now - 50000", ":now - 50000 + g"),
    ("old:", OVERDUE, "done", True, ":now - 200000 - g", ":now - 300000", "NULL"),
]


def fill(store: Store) -> None:
    series = _SERIES[store.db.dialect]
    with store.write():
        for prefix, rows, status, ever_run, due_at, result_at, last_update in _KINDS:
            params = {
                "n": rows,
                "now": NOW,
                "prefix": prefix,
                "status": status,
                "attempt": int(ever_run),
                "ever_run": ever_run,
            }
            items = _ITEMS.format(series=series, last_update=last_update)
            store.db.execute(sa.text(items), params)
            jobs = _JOBS.format(
                series=series, due_at=due_at, result_at=result_at, last_update=last_update
            )
            store.db.execute(sa.text(jobs), params)
        store.db.execute(sa.text("ANALYZE"))


@pytest.mark.slow
def test_each_pool_gets_its_share_of_a_large_backlog(db_url: str) -> None:
    gate = TaskGate(name="visit", timeout=60.0, weights=(40.0, 40.0, 20.0))
    with Store(db_url, clock=lambda: NOW) as store:
        fill(store)
        batches = [claim(store, [gate], BATCH, "w1").jobs for _ in range(ROUNDS)]
    first = batches[0]
    assert len(first) == BATCH
    taken = Counter(j.item_id.split(":")[0] for batch in batches for j in batch)
    total = sum(taken.values())
    mix = {kind: taken[kind] / total for kind in ("new", "lag", "old")}
    print(f"claimed mix over {total:,} jobs: {mix}")  # the note's figures
    for kind, weight in zip(("new", "lag", "old"), (0.4, 0.4, 0.2), strict=True):
        assert abs(mix[kind] - weight) <= 0.05, mix
    # The lagging share is the largest lags: the first batch's are lag:10000 down to 9601.
    lags = sorted(int(j.item_id.split(":")[1]) for j in first if j.item_id.startswith("lag:"))
    assert lags == list(range(LAGGING - 399, LAGGING + 1))
    # The oldest-due share is the most overdue re-runs: old:5000 down to old:4801.
    olds = sorted(int(j.item_id.split(":")[1]) for j in first if j.item_id.startswith("old:"))
    assert olds == list(range(OVERDUE - 199, OVERDUE + 1))


def test_a_short_pool_leaves_its_share_to_the_others(db_url: str) -> None:
    gate = TaskGate(name="visit", timeout=60.0, weights=(40.0, 40.0, 20.0))
    with Store(db_url, clock=lambda: NOW) as store:
        series = _SERIES[store.db.dialect]
        with store.write():  # 30 never-run jobs and nothing else
            params = {"n": 30, "now": NOW, "prefix": "new:", "status": "queued"}
            params |= {"attempt": 0, "ever_run": False}
            store.db.execute(sa.text(_ITEMS.format(series=series, last_update="NULL")), params)
            jobs = _JOBS.format(
                series=series, due_at=":now - g", result_at="NULL", last_update="NULL"
            )
            store.db.execute(sa.text(jobs), params)
        assert len(claim(store, [gate], 25, "w1").jobs) == 25


# -- each pool's query reads its own index, whatever the backlog --------------------------

_POOL_INDEX = {
    pools.Pool.NEVER_RUN: "jobs_never_run",
    pools.Pool.LAGGING: "jobs_lagging",
    pools.Pool.OLDEST_DUE: "jobs_rerun",
}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pg_only)])
def filled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """One filled database per backend for the module: explaining changes nothing."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("pools") / "trawl.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        with Store(f"sqlite:///{path}") as store:
            fill(store)
            yield store
        return
    admin = request.getfixturevalue("pg_admin_url")
    name = f"trawl_pools_{os.getpid()}"
    url = pg.create_database(admin, name, template=request.getfixturevalue("pg_template"))
    with Store(url) as store:
        fill(store)
        yield store
    pg.drop_database(admin, name)


def _plan(store: Store, pool: pools.Pool, limit: int) -> str:
    statement = pools.statement(pool, store.is_sqlite)
    params = {"task": "visit", "limit": limit, "now": NOW}
    prefix = "EXPLAIN QUERY PLAN " if store.is_sqlite else "EXPLAIN "
    with store.read():
        rows = store.db.execute(sa.text(prefix + statement.text), params).all()
    return "\n".join(str(row[3] if store.is_sqlite else row[0]) for row in rows)


@pytest.mark.slow
@pytest.mark.parametrize("pool", list(pools.Pool))
@pytest.mark.parametrize("limit", [32, BATCH])
def test_each_pool_reads_its_own_index(filled: Store, pool: pools.Pool, limit: int) -> None:
    plan = _plan(filled, pool, limit)
    index = _POOL_INDEX[pool]
    if filled.is_sqlite:
        assert re.search(rf"USING (COVERING )?INDEX {index}\b", plan), plan
        assert not re.search(r"^SCAN (jobs|items)\b", plan, re.MULTILINE), plan
        # The subquery reads its index in order; only the outer query sorts its few rows.
        assert plan.count("TEMP B-TREE") <= 1, plan
    else:
        assert f"using {index} on jobs" in plan, plan
        assert "Seq Scan" not in plan, plan
