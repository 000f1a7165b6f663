"""The crawl's per-page statements stay index lookups, however many pages a crawl has
(a scan here makes every commit slower as the crawl grows: quadratic overall)."""

from __future__ import annotations

import re

import psycopg
import pytest
import sqlalchemy as sa

from trawl.store import crawls
from trawl.store.store import Store

PER_PAGE = {
    "lower a depth": (crawls._LOWER, {"crawl": 1, "url": "u", "depth": 1, "via": None}),
    "slots held": (crawls._slots_held(2), {"k0": "host:h", "k1": "crawl:1", "now": 0.0}),
    "a page": (crawls._PAGE, {"crawl": 1, "url": "u"}),
    "skip jobs": (crawls._JOBS_SKIP_SQLITE, {"ids": '["page:1:u"]'}),
    "unskip jobs": (crawls._JOBS_UNSKIP_SQLITE, {"ids": '["page:1:u"]', "now": 0.0}),
    "pages of urls": (crawls._PAGES_OF_SQLITE, {"crawl": 1, "urls": '["u"]'}),
    "children": (crawls._CHILDREN_SQLITE, {"crawl": 1, "parents": '["u"]'}),
}


def _plan(store: Store, stmt: sa.TextClause, params: dict[str, object]) -> str:
    compiled = stmt.bindparams(**params).compile(
        dialect=store.db.engine.dialect, compile_kwargs={"literal_binds": True}
    )
    rows = store.db.execute(sa.text(f"EXPLAIN QUERY PLAN {compiled}")).all()
    return " | ".join(str(r[3]) for r in rows)


def test_per_page_statements_use_their_indexes(sqlite_url: str) -> None:
    with Store(sqlite_url) as store:
        tables = store.crawls
        for name, (stmt, params) in PER_PAGE.items():
            plan = _plan(store, stmt, params)
            assert "SCAN" not in plan.replace("SCAN json_each", ""), f"{name}: {plan}"
        listed = [
            sa.text(f"EXPLAIN QUERY PLAN {sql}")
            for sql in (
                "SELECT url FROM crawl_pages WHERE crawl_id = 1"
                " AND url IN (SELECT value FROM json_each('[\"a\"]'))",
                "SELECT l.child, p.depth FROM crawl_links l JOIN crawl_pages p"
                " ON p.crawl_id = l.crawl_id AND p.url = l.child WHERE l.crawl_id = 1"
                " AND l.parent IN (SELECT value FROM json_each('[\"a\"]'))",
            )
        ]
        for stmt in listed:
            plan = " | ".join(str(r[3]) for r in store.db.execute(stmt))
            assert "SCAN crawl" not in plan, plan
        assert tables.pages_of(1, ["a"]) == {}


# -- PostgreSQL: the politeness gate's count of slots held -----------------------------------

_FETCH_ITEMS = (
    "INSERT INTO items (id, data, created_at, updated_at)"
    " SELECT 'page:1:u' || g, '{}', 0, 0 FROM generate_series(1, :n) AS g"
)
# Every page fetched once (done) but the last two, which are running and hold slots: as in a
# crawl whose planner statistics were taken between batches, when few jobs were running.
_FETCH_JOBS = f"""
    INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,
                      selected, fail_count)
    SELECT 'page:1:u' || g, '{crawls.FETCH_TASK}', 'done', NULL, false, 1, 0, true, true, 0
    FROM generate_series(1, :n) AS g
"""
_RUN = "UPDATE jobs SET status = 'running', attempt = 2 WHERE item_id IN ('page:1:u1', 'page:1:u2')"
_SLOTS = (
    "INSERT INTO crawl_slots (key, item_id, attempt, until) VALUES"
    " ('host:h', 'page:1:u1', 2, 100), ('crawl:1', 'page:1:u1', 2, 100),"
    " ('host:h', 'page:1:u2', 2, 100), ('crawl:1', 'page:1:u2', 2, 100)"
)


# The politeness gate's two statements that count the slots held, with their parameters.
_RESERVE = {
    "host": "h", "host_key": "host:h", "crawl_key": "crawl:1", "now": 0.0,
    "earliest": 0.0, "concurrency": 16, "per_host": 4, "hold": 10.0, "step": 1.0,
    "item_id": "page:1:u3", "attempt": 1, "span": 60.0,
}  # fmt: skip
_GATE = (
    (crawls._RESERVE_POSTGRES, _RESERVE),
    (crawls._slots_held(2), {"k0": "host:h", "k1": "crawl:1", "now": 0.0}),
)


def _seed(store: Store, pages: int, *, analyze: bool) -> None:
    """*pages* fetch jobs, two of them running and holding slots; analyzed once the jobs
    are in (before the two start, as between a crawl's batches) if *analyze*."""
    with store.db.write():
        store.db.execute(sa.text(_FETCH_ITEMS), {"n": pages})
        store.db.execute(sa.text(_FETCH_JOBS), {"n": pages})
    if analyze:
        store.db.execute(sa.text("ANALYZE"))
    with store.db.write():
        store.db.execute(sa.text(_RUN))
        store.db.execute(sa.text(_SLOTS))


def _assert_by_item(plan: str) -> None:
    """Each slot's job is found by its item (jobs_item_task), never through the running
    jobs (jobs_task_status)."""
    assert "jobs_task_status" not in plan, plan
    assert "using jobs_item_task on jobs" in plan, plan


@pytest.mark.postgres
def test_postgres_slots_held_are_counted_from_the_slots_not_the_running_jobs(
    pg_url: str,
) -> None:
    # Joined to jobs, the count started from the running jobs through jobs_task_status,
    # walking every page's dead 'running' entry there until jobs was vacuumed: 4 ms a
    # reservation 60,000 pages into a crawl on a server without autovacuum.
    with Store(pg_url) as store:
        _seed(store, 20_000, analyze=True)
        for stmt, params in _GATE:
            with store.db.read():
                rows = store.db.execute(sa.text("EXPLAIN " + stmt.text), params)
                _assert_by_item("\n".join(r[0] for r in rows))
        with store.db.read():
            held = store.crawls.held(["host:h", "crawl:1", "host:other"], 0.0)
        assert held == {"host:h": 2, "crawl:1": 2, "host:other": 0}


def _numbered(sql: str) -> tuple[str, list[str]]:
    """*sql* with its :names as $1, $2... (for PREPARE), and the names in that order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"(?<!:):(\w+)", number, sql), names


def _literal(value: object) -> str:
    return "'" + value.replace("'", "''") + "'" if isinstance(value, str) else str(value)


@pytest.mark.postgres
def test_postgres_slots_held_go_by_item_even_when_planned_before_any_statistics(
    pg_url: str,
) -> None:
    # A crawl's statements are prepared in its first second, before anything analyzed jobs.
    # With `task = ...` both jobs_item_task and jobs_task_status fit the lookup, priced
    # alike without statistics; the generic plan took jobs_task_status and kept it as the
    # crawl grew, filtering every fetch job at each slot (6 ms a reservation 3 s in).
    with Store(pg_url) as store:
        _seed(store, 10, analyze=False)
        never = store.db.execute(
            sa.text("SELECT reltuples < 0 FROM pg_class WHERE relname = 'jobs'")
        ).scalar()
    assert never, "jobs must not have been analyzed for this test to mean anything"
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("SET plan_cache_mode = force_generic_plan")
        for n, (stmt, params) in enumerate(_GATE):
            sql, names = _numbered(stmt.text)
            raw.execute(f"PREPARE s{n} AS {sql}")
            args = ", ".join(_literal(params[name]) for name in names)
            _assert_by_item(
                "\n".join(str(r[0]) for r in raw.execute(f"EXPLAIN EXECUTE s{n}({args})"))
            )
