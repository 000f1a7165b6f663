"""The crawl's per-page statements stay index lookups, however many pages a crawl has
(a scan here makes every commit slower as the crawl grows: quadratic overall)."""

from __future__ import annotations

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
