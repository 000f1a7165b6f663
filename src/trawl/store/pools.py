"""The visit policies' pools: each one query over the whole due set of a task, on an index
of its own (swh-scheduler's ``grab_next_visits`` has one query per policy too).

- ``never_run``: jobs that never ran, oldest source activity first (the item's
  ``last_update``, kept on the job as ``source_update``), else the oldest due;
  index ``jobs_never_run``.
- ``lagging``: re-runs whose source changed after our last result, the largest lag
  (``source_update - result_at``) first; index ``jobs_lagging``.
- ``oldest_due``: re-runs, the longest overdue first; index ``jobs_rerun``.

Each reads at most *limit* rows of its index range, so a claim costs the same however large
the backlog. On PostgreSQL the rows are locked, skipping those other claims hold.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache

import sqlalchemy as sa

from trawl.store.connection import Database
from trawl.store.gates import CANDIDATE_COLUMNS, Candidate, candidate
from trawl.store.sql import q


class Pool(StrEnum):
    NEVER_RUN = "never_run"
    LAGGING = "lagging"
    OLDEST_DUE = "oldest_due"


# (the rows of the pool, their order): written as the indexes are, so both planners see
# an index that answers both. The outer query repeats the order on ``j``.
_POOLS = {
    Pool.NEVER_RUN: ("ready AND NOT ever_run", "niceness, coalesce(source_update, due_at)"),
    Pool.LAGGING: (
        "ready AND ever_run AND source_update > result_at",
        "niceness, (result_at - source_update)",
    ),
    Pool.OLDEST_DUE: ("ready AND ever_run", "niceness, due_at"),
}
_OUTER_ORDER = {
    Pool.NEVER_RUN: "j.niceness, coalesce(j.source_update, j.due_at)",
    Pool.LAGGING: "j.niceness, (j.result_at - j.source_update)",
    Pool.OLDEST_DUE: "j.niceness, j.due_at",
}


@cache
def statement(pool: Pool, sqlite: bool) -> sa.TextClause:
    """The best *limit* due jobs of one task in *pool*, best first."""
    where, order = _POOLS[pool]
    head = (
        f"SELECT id FROM jobs WHERE task = :task AND {where} AND due_at <= :now"
        f" ORDER BY {order} LIMIT :limit"
    )
    # PostgreSQL: ``= ANY(ARRAY(...))``, not IN, or the planner may hash-join a scan of all
    # jobs; the rows are locked, skipping those another claim holds.
    chosen = f"IN ({head})" if sqlite else f"= ANY(ARRAY({head} FOR UPDATE SKIP LOCKED))"
    return q(
        f"SELECT {CANDIDATE_COLUMNS} FROM jobs j JOIN items i ON i.id = j.item_id"
        f" WHERE j.id {chosen} ORDER BY {_OUTER_ORDER[pool]}"
    )


class Pools:
    """Reads of the visit policies' pools (inside the claim's transaction)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def candidates(self, task: str, pool: Pool, limit: int, now: float) -> list[Candidate]:
        """Up to *limit* due jobs of *task* in *pool*, best first."""
        if limit <= 0:
            return []
        stmt = statement(pool, self.db.is_sqlite)
        params = {"task": task, "limit": limit, "now": now}
        return [candidate(r) for r in self.db.execute(stmt, params)]
