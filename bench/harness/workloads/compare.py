"""The side-by-side rows: every peer on each workload, trawl's ``process sleep 10ms``, and
the raw-SQL limit (pgbench; sqlite3) doing claim+complete of 1 and 100 rows per transaction."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from harness import redis_server, trawl_db, workers
from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row
from harness.workloads import peers, process

SLEEP = "process sleep 10ms"
NOOP = "process no-op"
C = peers.SLEEP_CONCURRENCY


def run(plan: Plan, backend: Backend) -> list[Row]:
    """The peers' rows, no-op processing first (right after trawl's own, in ``process``),
    then trawl's sleep rows, the rest, and the raw-SQL limit."""
    if backend.dialect == "postgresql":
        rows = _postgres_peers(plan, backend)
        try:
            rows += _celery(plan, backend)
        except RuntimeError as error:  # no Redis to be had: the other rows still stand
            say(f"  celery skipped: {error}")
        limit = _pgbench(plan, backend)
    else:
        rows, limit = _huey(plan, backend), _sqlite_limit(plan, backend)
    # At synchronous=FULL only the no-op rows: sleeping jobs wait on the clock, not the disk.
    if backend.synchronous != "FULL":
        rows += _trawl_sleep(plan, backend)
    return rows + limit


def _sizes(plan: Plan) -> tuple[int, int, int]:
    """(no-op jobs, sleep jobs, jobs for slow systems) for this plan."""
    quick = plan.name == "quick"
    return plan.process_jobs, (1_000 if quick else 20_000), (300 if quick else 2_000)


def _trawl_sleep(plan: Plan, backend: Backend) -> list[Row]:
    _, jobs, _ = _sizes(plan)
    app = f"{trawl_db.APPS / 'sleep.py'}:app"
    rates = []
    with process._template(backend, jobs) as template:
        for i in range(plan.runs):
            with backend.clone(template, "sleep") as url:
                workers.run(url, 1, C, app)
                rates.append(process._steady_rate(backend, url, jobs))
            say(f"  trawl {backend.name} {SLEEP} run {i + 1}: {rates[-1]:,.0f} jobs/s")
    return [
        Row(
            system="trawl",
            backend=backend.name,
            workload=SLEEP,
            variant=f"1 process x{C}",
            unit="jobs/s",
            better="higher",
            runs=rates,
            params={"jobs": jobs, "processes": 1, "concurrency": C},
        )
    ]


def _postgres_peers(plan: Plan, backend: Backend) -> list[Row]:
    """pgqueuer's batch-100 no-op row is measured in rounds with trawl's (versus.py)."""
    noop, sleep, slow = _sizes(plan)
    single, batch = plan.enqueue_single, plan.enqueue_batch
    specs = [
        ("pgqueuer", "enqueue single", "enqueue() per job", single, "enqueue-single", {}),
        ("pgqueuer", "enqueue batch", "one enqueue() call", batch, "enqueue-batch", {}),
        ("pgqueuer", NOOP, "batch 10", noop, "noop", {"batch": 10}),
        ("pgqueuer", SLEEP, f"batch 8, max {C} in flight", sleep, "sleep",
         {"batch": 8, "concurrency": C}),
        ("procrastinate", "enqueue single", "defer_async per job", single, "enqueue-single", {}),
        ("procrastinate", "enqueue batch", "batch_defer_async", batch, "enqueue-batch", {}),
        ("procrastinate", NOOP, "concurrency 1", slow, "noop", {"concurrency": 1}),
        ("procrastinate", NOOP, "concurrency 16", slow, "noop", {"concurrency": 16}),
        ("procrastinate", SLEEP, f"concurrency {C}", slow, "sleep", {"concurrency": C}),
    ]  # fmt: skip
    specs.sort(key=lambda spec: spec[1] != NOOP)  # measured next to trawl's no-op rows
    return [
        peers.measure(plan, backend, _peer(system, workload, variant, jobs, script, params))
        for system, workload, variant, jobs, script, params in specs
    ]


def _peer(
    system: str, workload: str, variant: str, jobs: int, script: str, params: dict[str, Any]
) -> peers.PeerRow:
    """A peer row whose script options are its recorded batch and concurrency."""
    return peers.PeerRow(
        system=system, workload=workload, variant=variant, jobs=jobs, script=script,
        params=dict(params), batch=params.get("batch"),
        concurrency=params.get("concurrency", params.get("workers")),
    )  # fmt: skip


def _celery(plan: Plan, backend: Backend) -> list[Row]:
    # ~1,000 jobs/s and ~2,000 enqueues/s: 20,000 jobs took a minute a run (the full run
    # neared its 20 minutes), so Celery gets twice the slow systems' jobs.
    _, _, slow = _sizes(plan)
    jobs = 2 * slow
    env = {"BENCH_REDIS": redis_server.url(), "BENCH_CELERY_QUEUE": "trawl-bench"}
    specs = [
        ("enqueue single", "delay() per job", plan.enqueue_single, "enqueue-single", {}),
        ("enqueue batch", "apply_async loop, one producer", jobs, "enqueue-batch", {}),
        (NOOP, "prefork 2", jobs, "noop", {"pool": "prefork", "concurrency": 2}),
        (SLEEP, f"threads {C}", jobs, "sleep", {"pool": "threads", "concurrency": C}),
    ]
    specs.sort(key=lambda spec: spec[0] != NOOP)
    return [peers.measure(plan, backend, _peer("celery", *spec), env) for spec in specs]


def _huey(plan: Plan, backend: Backend) -> list[Row]:
    noop, sleep, _ = _sizes(plan)
    specs = [
        ("enqueue single", "task() per job", plan.enqueue_single, "enqueue-single", {}),
        ("enqueue batch", "task() loop (no bulk API)", plan.enqueue_batch, "enqueue-batch", {}),
        (NOOP, "1 thread worker", noop, "noop", {"workers": 1}),
        (SLEEP, f"{C} thread workers", sleep, "sleep", {"workers": C}),
    ]
    if backend.synchronous == "FULL":  # what a WAL sync per commit changes: the no-op rows
        specs = [spec for spec in specs if spec[0] == NOOP]
    specs.sort(key=lambda spec: spec[0] != NOOP)  # measured next to trawl's no-op rows
    return [peers.measure(plan, backend, _peer("huey", *spec)) for spec in specs]


# -- raw SQL limit: one transaction claims `batch` rows and completes them ---------------

_PG_SCHEMA = """
CREATE TABLE q (id bigint PRIMARY KEY, status text NOT NULL, attempt int NOT NULL,
                owner int, due_at double precision NOT NULL);
INSERT INTO q SELECT g, 'queued', 0, NULL, g FROM generate_series(1, {jobs}) g;
CREATE INDEX q_due ON q (due_at) WHERE status = 'queued';
CREATE INDEX q_running ON q (owner) WHERE status = 'running';
VACUUM ANALYZE q;
"""
_PGBENCH = """BEGIN;
WITH c AS (SELECT id FROM q WHERE status = 'queued' ORDER BY due_at LIMIT {batch} FOR UPDATE SKIP LOCKED)
UPDATE q SET status = 'running', attempt = q.attempt + 1, owner = :client_id FROM c WHERE q.id = c.id;
UPDATE q SET status = 'done', owner = NULL WHERE status = 'running' AND owner = :client_id;
COMMIT;
"""
CLIENTS = 2


def _pgbench(plan: Plan, backend: Backend) -> list[Row]:
    noop, _, slow = _sizes(plan)
    return [_pgbench_row(plan, backend, 1, slow * 4), _pgbench_row(plan, backend, 100, noop)]


def _pgbench_row(plan: Plan, backend: Backend, batch: int, jobs: int) -> Row:
    rates = []
    per_client = jobs // (batch * CLIENTS)
    for i in range(plan.runs):
        with backend.database("pgbench") as url, tempfile.TemporaryDirectory() as tmp:
            u = sa.make_url(url)
            conn = backend.raw(url)
            conn.autocommit = True
            for stmt in _PG_SCHEMA.format(jobs=jobs).split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.close()
            script = Path(tmp) / "claim.sql"
            script.write_text(_PGBENCH.format(batch=batch))
            done = subprocess.run(
                [
                    "pgbench",
                    "-n",
                    "-h",
                    u.host or "127.0.0.1",
                    "-p",
                    str(u.port or 5432),
                    "-U",
                    u.username or "postgres",
                    "-c",
                    str(CLIENTS),
                    "-j",
                    str(CLIENTS),
                    "-t",
                    str(per_client),
                    "-f",
                    str(script),
                    u.database or "",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            tps = float(re.search(r"tps = ([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
            rates.append(tps * batch)
        say(f"  raw-sql pgbench {batch}/txn run {i + 1}: {rates[-1]:,.0f} rows/s")
    return Row(
        system="raw-sql",
        backend=backend.name,
        workload="process no-op",
        variant=f"pgbench claim+complete {batch}/txn, {CLIENTS} clients",
        unit="jobs/s",
        better="higher",
        runs=rates,
        params={"jobs": per_client * batch * CLIENTS, "batch": batch, "clients": CLIENTS},
    )


def _sqlite_limit(plan: Plan, backend: Backend) -> list[Row]:
    noop, _, slow = _sizes(plan)
    return [_sqlite_row(plan, backend, 1, slow * 4), _sqlite_row(plan, backend, 100, noop)]


def _sqlite_row(plan: Plan, backend: Backend, batch: int, jobs: int) -> Row:
    rates = []
    for _ in range(plan.runs):
        with tempfile.TemporaryDirectory() as tmp:
            conn = sqlite3.connect(Path(tmp) / "q.db", isolation_level=None)
            for pragma in backend.pragmas:
                conn.execute(f"PRAGMA {pragma}")
            conn.execute(
                "CREATE TABLE q (id INTEGER PRIMARY KEY, status TEXT, attempt INT, due_at REAL)"
            )
            conn.execute("CREATE INDEX q_due ON q (due_at) WHERE status = 'queued'")
            conn.executemany(
                "INSERT INTO q VALUES (?, 'queued', 0, ?)", [(n, n) for n in range(jobs)]
            )
            started = time.perf_counter()
            done = 0
            while True:
                conn.execute("BEGIN IMMEDIATE")
                ids = conn.execute(
                    "UPDATE q SET status = 'running', attempt = attempt + 1 WHERE id IN"
                    " (SELECT id FROM q WHERE status = 'queued' ORDER BY due_at LIMIT ?)"
                    " RETURNING id, attempt",
                    (batch,),
                ).fetchall()
                conn.executemany("UPDATE q SET status = 'done' WHERE id = ? AND attempt = ?", ids)
                conn.execute("COMMIT")
                if not ids:
                    break
                done += len(ids)
            rates.append(done / (time.perf_counter() - started))
            conn.close()
        say(f"  raw-sql {backend.name} sqlite3 {batch}/txn: {rates[-1]:,.0f} rows/s")
    return Row(
        system="raw-sql",
        backend=backend.name,
        workload="process no-op",
        variant=f"sqlite3 claim+complete {batch}/txn",
        unit="jobs/s",
        better="higher",
        runs=rates,
        params={"jobs": jobs, "batch": batch},
    )
