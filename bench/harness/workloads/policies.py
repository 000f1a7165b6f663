"""``claim with visit policy``: claims of 1,000 shared 40/40/20 between the never-run,
lagging and oldest-due pools, each its own index range scan, from a backlog of 100,000
never-run, 10,000 lagging and 5,000 overdue jobs (bulk-seeded, not timed). Baseline: the
plain claim (no policy: never-run first, one range scan) of the same batches from a copy
of the same backlog. The ratio is what the three queries of a policy claim cost.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import sqlalchemy as sa

from harness import trawl_db
from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row, set_ratio
from trawl.engine.claim import TaskGate, claim
from trawl.store.store import Store

NOW = 1_700_000_000.0
BATCH = 1_000
CLAIMS = 10
_SERIES = {
    "postgresql": "SELECT g FROM generate_series(1, :n) AS g",
    "sqlite": "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < :n) "
    "SELECT g FROM s",
}
_ITEMS = (
    "INSERT INTO items (id, data, created_at, updated_at, last_update)"
    " SELECT :prefix || g, '{{}}', :now, :now, {last_update} FROM ({series}) AS n"
)
_JOBS = (
    "INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness, ever_run,"
    " selected, fail_count, result_at, source_update)"
    " SELECT :prefix || g, 'visit', :status, {due_at}, true, :attempt, 0, :ever_run, true, 0,"
    " {result_at}, {last_update} FROM ({series}) AS n"
)
_KINDS = [  # prefix, rows, status, ever_run, due_at, result_at, last_update
    ("new:", 100_000, "queued", False, ":now - g", "NULL", "NULL"),
    ("lag:", 10_000, "done", True, ":now - 100 - g", ":now - 50000", ":now - 50000 + g"),
    ("old:", 5_000, "done", True, ":now - 200000 - g", ":now - 300000", "NULL"),
]


def run(plan: Plan, backend: Backend) -> list[Row]:
    with _backlog(backend) as template:
        plain = _row(plan, backend, template, None)
        policy = _row(plan, backend, template, (40.0, 40.0, 20.0))
    set_ratio(policy, plain)
    return [plain, policy]


def _row(plan: Plan, backend: Backend, template: str, weights: tuple[float, ...] | None) -> Row:
    gate = TaskGate(name="visit", timeout=300.0, weights=weights)  # type: ignore[arg-type]
    variant = "40/40/20 pools" if weights else "no policy"
    runs = []
    for _ in range(plan.runs):
        with backend.clone(template, "policy_claim") as url:
            store = Store(url, clock=lambda: NOW)
            try:
                started = time.perf_counter()
                claimed = sum(len(claim(store, [gate], BATCH, "b").jobs) for _ in range(CLAIMS))
                runs.append(claimed / (time.perf_counter() - started))
            finally:
                store.close()
        if claimed != BATCH * CLAIMS:
            raise RuntimeError(f"claimed {claimed} of {BATCH * CLAIMS}")
    say(f"  trawl {backend.name} claim {variant}: " + ", ".join(f"{r:,.0f}" for r in runs))
    return Row(
        system="trawl", backend=backend.name, workload="claim with visit policy",
        variant=variant, unit="jobs/s", better="higher", runs=runs,
        params={"batch": BATCH, "claims": CLAIMS, "backlog": 115_000},
    )  # fmt: skip


@contextlib.contextmanager
def _backlog(backend: Backend) -> Iterator[str]:
    with backend.database("policy") as url:
        trawl_db.prepare(url)
        store = Store(url)
        try:
            _fill(store)
        finally:
            store.close()
        yield url


def _fill(store: Store) -> None:
    series = _SERIES[store.db.dialect]
    with store.write():
        for prefix, rows, status, ever_run, due_at, result_at, last_update in _KINDS:
            params = {"n": rows, "now": NOW, "prefix": prefix, "status": status}
            params |= {"attempt": int(ever_run), "ever_run": ever_run}
            store.db.execute(sa.text(_ITEMS.format(series=series, last_update=last_update)), params)
            jobs = _JOBS.format(
                series=series, due_at=due_at, result_at=result_at, last_update=last_update
            )
            store.db.execute(sa.text(jobs), params)
    if not store.is_sqlite:
        with store.write():
            store.db.execute(sa.text("ANALYZE jobs"))
