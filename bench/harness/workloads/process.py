"""``process no-op``: how many no-op jobs per second worker processes get through.

A prepared database holds N due ``noop`` jobs (set up once per backend, copied per run, not
timed). Worker processes start with ``--exit-when-idle``; the figure is the steady rate
between the first and the last commit, read from the jobs' ``result_at`` (the database's
clock), so process start-up (imports, schema check, task registration) is left out. The
wall time from spawning to the last exit is kept alongside in ``extra.wall_s``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness import raw, seed, trawl_db, workers
from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row, set_ratio

WORKLOAD = "process no-op"


def run(plan: Plan, backend: Backend) -> list[Row]:
    with _template(backend, plan.process_jobs) as template:
        baseline = _raw(plan, backend, template)
        # On PostgreSQL one process is measured in rounds with pgqueuer (workloads/versus.py).
        counts = [n for n in plan.processes if n > 1 or backend.dialect != "postgresql"]
        rows = [_trawl(plan, backend, template, n) for n in counts]
        if backend.dialect == "postgresql":
            # Two lanes pay once each lane's batch is a full 100 (docs/concepts.md).
            rows.insert(0, _trawl(plan, backend, template, 1, concurrency=200, connections=2))
    for row in rows:
        set_ratio(row, baseline)
    return [baseline, *rows]


@contextlib.contextmanager
def _template(backend: Backend, jobs: int) -> Iterator[str]:
    with backend.database("process_tmpl") as url:
        trawl_db.prepare(url)
        seed.fill(backend, url, [(seed.Kind.DUE, 1, jobs)])
        yield url


def _trawl(
    plan: Plan,
    backend: Backend,
    template: str,
    processes: int,
    *,
    concurrency: int | None = None,
    connections: int = 1,
) -> Row:
    rates, walls = [], []
    slots = concurrency or plan.concurrency
    for i in range(plan.runs):
        with backend.clone(template, "process") as url:
            wall = workers.run(url, processes, slots, connections=connections)
            rate = _steady_rate(backend, url, plan.process_jobs)
        say(
            f"  trawl {backend.name} {processes}p x{slots}, {connections} connection(s) "
            f"run {i + 1}: {rate:,.0f} jobs/s (wall {wall:.2f}s)"
        )
        rates.append(rate)
        walls.append(round(wall, 3))
    return Row(
        system="trawl",
        backend=backend.name,
        workload=WORKLOAD,
        variant=f"{processes} process{'es' if processes > 1 else ''} x{slots}"
        + (f", {connections} connections" if connections > 1 else ""),
        unit="jobs/s",
        better="higher",
        runs=rates,
        params={
            "jobs": plan.process_jobs,
            "processes": processes,
            "concurrency": slots,
            "connections": connections,
            "driver": workers.driver(),
        },
        extra={"wall_s": walls, "wall_jobs_per_s": [plan.process_jobs / w for w in walls]},
    )


_SPAN = "SELECT count(*), min(result_at), max(result_at) FROM jobs WHERE status = 'done'"
_FIRST = "SELECT count(*) FROM jobs WHERE result_at = (SELECT min(result_at) FROM jobs)"
_DONE_JOURNAL = "SELECT count(*), count(DISTINCT item_id) FROM journal WHERE kind = 'job.done'"


def _steady_rate(backend: Backend, url: str, jobs: int) -> float:
    """Jobs committed after the first commit, over the time from it to the last one; checks
    on the way that every job was committed exactly once."""
    return _steady(backend, url, jobs).rate


@dataclass(frozen=True)
class Steady:
    """The steady span of a run: from its first commit to its last (database times)."""

    jobs: int  # committed after the first commit
    first: float
    last: float

    @property
    def rate(self) -> float:
        return self.jobs / (self.last - self.first)


def _steady(backend: Backend, url: str, jobs: int) -> Steady:
    conn = backend.raw(url)
    try:
        done, first, last = _one(conn, _SPAN)
        (in_first,) = _one(conn, _FIRST)
        journal, distinct = _one(conn, _DONE_JOURNAL)
    finally:
        conn.close()
    if not done == journal == distinct == jobs:
        raise RuntimeError(
            f"{jobs} jobs, but {done} done, {journal} job.done journal rows for "
            f"{distinct} items: a job was lost or committed twice"
        )
    return Steady(jobs=jobs - in_first, first=float(first), last=float(last))


def _one(conn: Any, sql: str) -> tuple[Any, ...]:
    row = tuple(conn.execute(sql).fetchone())
    conn.rollback()  # psycopg: end the read transaction (a no-op on sqlite3 in autocommit)
    return row


def _raw(plan: Plan, backend: Backend, template: str) -> Row:
    rates = []
    for i in range(plan.runs):
        with backend.clone(template, "process_raw") as url:
            conn = backend.raw(url)
            try:
                started = time.perf_counter()
                count = raw.process(conn, backend.dialect, plan.raw_batch)
                rate = count / (time.perf_counter() - started)
            finally:
                conn.close()
        if count != plan.process_jobs:
            raise RuntimeError(f"raw SQL processed {count} of {plan.process_jobs} jobs")
        say(f"  raw-sql {backend.name} run {i + 1}: {rate:,.0f} jobs/s")
        rates.append(rate)
    return Row(
        system="raw-sql",
        backend=backend.name,
        workload=WORKLOAD,
        variant=f"1 process, batch {plan.raw_batch}",
        unit="jobs/s",
        better="higher",
        runs=rates,
        params={"jobs": plan.process_jobs, "processes": 1, "batch": plan.raw_batch},
    )
