"""The claim stays an index range scan however many jobs wait in the table.

50,000 jobs that are not due (done, due later) and a few hundred due ones; then the exact
statements of ``trawl.store.claim`` are explained with the parameters a worker passes. A plan
that reads the whole jobs (or items) table fails here before it makes claims slow at scale.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support import pg
from trawl.engine import claim as engine_claim
from trawl.engine.claim import TaskGate
from trawl.store import claim, transitions
from trawl.store.store import Store

WAITING = 50_000
DUE = 300
NOW = 1_700_000_000.0
TASKS = ["price", "stock"]
TIMEOUTS = [300.0, 60.0]
LIMIT = 32
BACKLOG = NOW + 10 * WAITING  # a worker back after an outage: every waiting job is due

_SERIES = {
    "postgresql": "SELECT g FROM generate_series(1, :n) AS g",
    "sqlite": "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < :n) "
    "SELECT g FROM s",
}
_ITEMS = """
    INSERT INTO items (id, data, created_at, updated_at)
    SELECT 'url:https://example.com/' || g, '{{}}', :now, :now FROM ({series}) AS n
"""
# The first DUE jobs are queued and due (in jobs_claim); the rest are done and due later, one
# every few seconds from an hour on (in jobs_pending), like results with a TTL.
_JOBS = """
    INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,
                      selected, fail_count)
    SELECT 'url:https://example.com/' || g, CASE WHEN g % 2 = 0 THEN 'price' ELSE 'stock' END,
           CASE WHEN g <= :due THEN 'queued' ELSE 'done' END,
           CASE WHEN g <= :due THEN :now - g ELSE :now + 3600 + 5 * g END,
           g <= :due, 0, 0, g > :due, true, 0
    FROM ({series}) AS n
"""


def fill(store: Store, due: int = DUE, waiting: int = WAITING) -> None:
    series = _SERIES[store.db.dialect]
    params = {"n": due + waiting, "due": due, "now": NOW}
    with store.db.write():
        store.db.execute(sa.text(_ITEMS.format(series=series)), params)
        store.db.execute(sa.text(_JOBS.format(series=series)), params)


def claim_params(now: float = NOW) -> dict[str, object]:
    return {"now": now, "limit": LIMIT, "owner": "host:1234:abc"}


# -- PostgreSQL -----------------------------------------------------------------------------

pg_only = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg_store(pg_admin_url: str, pg_template: str) -> Iterator[Store]:
    """One filled database for the module: explaining a statement does not change it."""
    name = f"trawl_plan_{os.getpid()}"
    url = pg.create_database(pg_admin_url, name, template=pg_template)
    with Store(url) as store:
        fill(store)
        store.db.execute(sa.text("ANALYZE"))
        yield store
    pg.drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def pg_due_store(pg_admin_url: str, pg_template: str) -> Iterator[Store]:
    """10,000 jobs, every one of them due: a large claim is then a tenth of the table."""
    name = f"trawl_plan_due_{os.getpid()}"
    url = pg.create_database(pg_admin_url, name, template=pg_template)
    with Store(url) as store:
        fill(store, due=10_000, waiting=0)
        store.db.execute(sa.text("ANALYZE"))
        yield store
    pg.drop_database(pg_admin_url, name)


def explain(store: Store, statement: sa.TextClause, params: dict[str, object]) -> str:
    with store.db.read():
        rows = store.db.execute(sa.text("EXPLAIN " + statement.text), params)
        return "\n".join(row[0] for row in rows)


def assert_index_only(plan: str, index: str) -> None:
    assert f"using {index} on jobs" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan
    assert "Seq Scan on items" not in plan, plan


def pg_claim_params(now: float = NOW) -> dict[str, object]:
    return claim_params(now) | {"tasks": TASKS, "timeouts": TIMEOUTS}


@pg_only
def test_postgres_claim_scans_only_the_claim_index(pg_store: Store) -> None:
    assert_index_only(explain(pg_store, claim.CLAIM_POSTGRES, pg_claim_params()), "jobs_claim")


@pg_only
def test_postgres_a_large_claim_updates_its_rows_through_the_primary_key(
    pg_due_store: Store,
) -> None:
    # A worker with a thousand slots: joined to its picked rows, the update was planned as
    # a hash join over all of jobs once the claim was large next to the table.
    plan = explain(pg_due_store, claim.CLAIM_POSTGRES, pg_claim_params() | {"limit": 1000})
    assert_index_only(plan, "jobs_claim")
    assert "using jobs_pkey on jobs" in plan, plan


@pg_only
def test_postgres_a_large_gated_lease_updates_its_rows_through_the_primary_key(
    pg_due_store: Store,
) -> None:
    with pg_due_store.db.read():
        ids = [r[0] for r in pg_due_store.db.execute(sa.text("SELECT id FROM jobs LIMIT 100"))]
    params = {"id": ids, "timeout": [60.0] * len(ids), "now": NOW, "owner": "host:1234:abc"}
    assert_index_only(explain(pg_due_store, claim.LEASE_POSTGRES, params), "jobs_pkey")


def commit_params(ids: list[int]) -> dict[str, object]:
    """A worker's fenced commit of *ids* (attempt 1, done), as Store.apply_outcomes sends it."""
    rows = [(i, 1, "done", None, True, "1", 3600.0, None, None, None, False) for i in ids]
    return transitions.outcome_params(False, rows) | {"now": NOW}


def assert_no_join(plan: str) -> None:
    for node in ("Nested Loop", "Hash Join", "Merge Join", "Function Scan", "Seq Scan on jobs"):
        assert node not in plan, plan


@pg_only
@pytest.mark.parametrize("size", [10, 1000])
def test_postgres_a_fenced_commit_finds_each_job_by_id_and_joins_nothing(
    pg_due_store: Store, size: int
) -> None:
    # The statistics say no job is running (as whenever they were taken between batches).
    # Joined to the batch's JSON elements, the commit was planned as a nested loop over the
    # running jobs that expanded the whole batch again for each: 60 ms for 500 jobs.
    with pg_due_store.db.read():
        rows = pg_due_store.db.execute(sa.text("SELECT id FROM jobs LIMIT :n"), {"n": size})
        ids = [r[0] for r in rows]
    assert_no_join(explain(pg_due_store, transitions.COMMIT_POSTGRES, commit_params(ids)))


@pg_only
@pytest.mark.parametrize("now", [NOW, BACKLOG], ids=["steady", "backlog"])
def test_postgres_promote_scans_only_the_pending_index(pg_store: Store, now: float) -> None:
    plan = explain(pg_store, claim.PROMOTE_POSTGRES, {"now": now})
    assert_index_only(plan, "jobs_pending")


# psycopg prepares a statement it has run a few times; PostgreSQL may then plan it once for
# any parameters (a generic plan), which must not fall back to scanning the table either.
_TYPES = {"tasks": "text[]", "timeouts": "float8[]", "now": "float8", "limit": "int"}
_TYPES_OWNER = _TYPES | {"owner": "text"}


def generic_plan(
    store: Store,
    statement: sa.TextClause,
    types: dict[str, str],
    values: dict[str, str] | None = None,
) -> str:
    names = list(types)
    text = re.sub(r"(?<!:):(\w+)", lambda m: f"${names.index(m.group(1)) + 1}", statement.text)
    values = {
        "tasks": "'{price,stock}'",
        "timeouts": "'{300,60}'",
        "now": repr(NOW),
        "limit": str(LIMIT),
        "owner": "'host:1234:abc'",
    } | (values or {})
    args = ", ".join(values[name] for name in names)
    with store.db.read():
        store.db.execute(sa.text(f"PREPARE stmt ({', '.join(types.values())}) AS {text}"))
        store.db.execute(sa.text("SET LOCAL plan_cache_mode = force_generic_plan"))
        plan = "\n".join(r[0] for r in store.db.execute(sa.text(f"EXPLAIN EXECUTE stmt({args})")))
        store.db.execute(sa.text("DEALLOCATE stmt"))
    return plan


@pg_only
def test_postgres_generic_plans_stay_on_their_indexes(pg_store: Store) -> None:
    assert_index_only(generic_plan(pg_store, claim.CLAIM_POSTGRES, _TYPES_OWNER), "jobs_claim")
    promote = generic_plan(pg_store, claim.PROMOTE_POSTGRES, {"now": "float8"})
    assert_index_only(promote, "jobs_pending")


@pg_only
def test_postgres_a_fenced_commits_generic_plan_joins_nothing(pg_due_store: Store) -> None:
    ids = list(range(1, 1001))
    params = commit_params(ids)
    types = {"batch": "jsonb", "now": "float8", "ids": "bigint[]"}
    values = {"batch": f"'{params['batch']}'", "ids": f"'{{{','.join(map(str, ids))}}}'"}
    assert_no_join(generic_plan(pg_due_store, transitions.COMMIT_POSTGRES, types, values))


@pg_only
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_postgres_a_lease_renewal_finds_each_job_by_id_and_joins_nothing(
    pg_due_store: Store, generic: bool
) -> None:
    # Joined to its unnested arrays, a generic plan renewed 1,000 leases in 294 ms.
    leases = [(i, 1, 60.0) for i in range(1, 1001)]
    params = transitions.renew_params(False, leases) | {"now": NOW}
    if not generic:
        plan = explain(pg_due_store, transitions.RENEW_POSTGRES, params)
    else:
        types = {"ids": "bigint[]", "batch": "jsonb", "now": "float8"}
        ids = ",".join(str(i) for i, _, _ in leases)
        values = {"batch": f"'{params['batch']}'", "ids": f"'{{{ids}}}'"}
        plan = generic_plan(pg_due_store, transitions.RENEW_POSTGRES, types, values)
    assert_no_join(plan)


# -- SQLite ---------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[False, True], ids=["fresh", "analyzed"])
def sqlite_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[Store]:
    path = tmp_path_factory.mktemp("plan") / "trawl.db"
    shutil.copy(sqlite_template, path)
    with Store(f"sqlite:///{path}") as store:
        fill(store)
        if request.param:
            store.db.execute(sa.text("ANALYZE"))
        yield store


def query_plan(store: Store, statement: sa.TextClause, params: dict[str, object]) -> list[str]:
    rows = store.db.execute(sa.text("EXPLAIN QUERY PLAN " + statement.text), params)
    return [row[3] for row in rows]


def assert_searches(plan: list[str], index: str) -> None:
    assert any(re.search(rf"USING (COVERING )?INDEX {index}\b", line) for line in plan), plan
    full_scans = [line for line in plan if re.match(r"SCAN (jobs|items)\b", line)]
    assert full_scans == [], plan


def test_sqlite_claim_searches_the_claim_index(sqlite_store: Store) -> None:
    params = claim_params() | claim.claim_sqlite_params(TASKS, TIMEOUTS)
    plan = query_plan(sqlite_store, claim.claim_sqlite(len(TASKS)), params)
    assert_searches(plan, "jobs_claim")


@pytest.mark.parametrize("now", [NOW, BACKLOG], ids=["steady", "backlog"])
def test_sqlite_promote_searches_the_pending_index(sqlite_store: Store, now: float) -> None:
    assert_searches(query_plan(sqlite_store, claim.PROMOTE_SQLITE, {"now": now}), "jobs_pending")


def test_the_explained_claim_takes_the_oldest_due_jobs(sqlite_url: str) -> None:
    with Store(sqlite_url, clock=lambda: NOW) as store:
        fill(store)
        gates = [TaskGate(name=n, timeout=t) for n, t in zip(TASKS, TIMEOUTS, strict=True)]
        jobs = engine_claim.claim(store, gates, LIMIT, "w").jobs
    numbers = sorted(int(j.item_id.rsplit("/", 1)[1]) for j in jobs)
    assert numbers == list(range(DUE - LIMIT + 1, DUE + 1))
