"""bench/frontier: claim latency and pages/s of a crawl whose frontier holds 20,000 pages and
10 million pages (over 200 and 100,000 hosts), on PostgreSQL (``--backend sqlite``: SQLite), in
one run.

Per size: a fresh database gets a crawl made as ``trawl crawl`` makes it, and its frontier
by bulk SQL (``harness/frontier.py``; seeding is timed and reported, not part of a figure);
then

1. claim latency: ``engine.claim.claim`` of 16 ``trawl.fetch`` jobs (what a ``--concurrency
   16`` crawl worker asks for at most), 20 warm-up claims then 300 timed, each batch released
   untimed (due again, behind the rest of the frontier); p50 and p90;
2. the crawl's progress count (``operations.progress``, what ``trawl crawl``'s live line and
   ``trawl crawl show`` read), timed once;
3. pages/s: a crawl worker (``apps/frontier_worker.py``: ``trawl worker
   trawl.crawl.app:app`` with its host names resolved to the demo server) fetches from the
   frontier for ``--seconds``, WARC written and synced; the figure is the attempts started
   between 10 s after the worker started and its stop, over that time. The worker counts the
   statements and transactions it sends; the server's counters for the database
   (``pg_stat_database``: commits, rows written) and the cluster's WAL position are read
   before and after (PostgreSQL only).

The ratios are the 10M figures over the 20k figures of the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from harness import frontier, postgres
from harness.backends import PostgreSQL, SQLite

from trawl.crawl import operations
from trawl.engine.claim import TaskGate, claim
from trawl.engine.commit import commit
from trawl.model.records import AttemptResult, ClaimedJob
from trawl.model.states import Outcome
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

HERE = Path(__file__).resolve().parent
PY = HERE.parent / ".venv" / "bin" / "python"
CONCURRENCY = 16
CLAIM_LIMIT = 16
WARMUP_CLAIMS = 20
CLAIMS = 300
WARMUP_S = 10.0  # of the crawl window, left out of pages/s (connections, caches)
SITE_PAGES = 20_000  # the demo site: /page/0 ... /page/19959 on every host name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="20000,10000000", help="frontier sizes, in pages")
    parser.add_argument("--per-host", type=int, default=100, help="frontier pages per host")
    parser.add_argument("--seconds", type=float, default=60.0, help="crawl window")
    parser.add_argument("--workers", type=int, default=1, help="worker processes crawling")
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument(
        "--own-cluster",
        action="store_true",
        help="a throwaway PostgreSQL cluster, so the WAL counted is this benchmark's alone",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    backend: SQLite | PostgreSQL
    if args.backend == "sqlite":
        backend = SQLite()
    else:
        backend = PostgreSQL(_own_cluster() if args.own_cluster else postgres.connect())
    work = Path(tempfile.mkdtemp(prefix="trawl-frontier-bench-"))
    rows = []
    try:
        for size in sizes:
            rows.append(run(backend, size, args, work))
            print(_line(rows[-1]), flush=True)
            _save(rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        backend.close()
    for row in rows[1:]:
        base = rows[0]
        print(
            f"{row['pages']:,} vs {base['pages']:,}: claim p50"
            f" {row['claim_p50_ms'] / base['claim_p50_ms']:.2f}x, p90"
            f" {row['claim_p90_ms'] / base['claim_p90_ms']:.2f}x, pages/s"
            f" {row['pages_per_s'] / base['pages_per_s']:.2f}x, progress count"
            f" {row['progress_s'] / base['progress_s']:.0f}x"
        )
    return 0


def _save(rows: list[dict[str, Any]]) -> None:
    """Write the rows so far (a run of the 10M size takes a while: keep what it measured)."""
    meta = {"cpus": os.cpu_count(), "load_end": os.getloadavg(), "at": time.time()}
    (HERE / "results").mkdir(exist_ok=True)
    out = HERE / "results" / "frontier-latest.json"
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


def _own_cluster() -> postgres.Server:
    cluster = postgres.Cluster()
    cluster.start()
    return postgres.Server(cluster.url, cluster)


def run(backend: SQLite | PostgreSQL, pages: int, args: Any, work: Path) -> dict[str, Any]:
    site = _serve()
    place = Path(tempfile.mkdtemp(prefix=f"{pages}-", dir=work))
    try:
        with backend.database(f"frontier_{pages}") as url:
            return _measure(backend, url, pages, args, place, site)
    finally:
        site[0].terminate()
        site[0].wait()


def _measure(
    backend: SQLite | PostgreSQL,
    url: str,
    pages: int,
    args: Any,
    place: Path,
    site: tuple[subprocess.Popen[str], int],
) -> dict[str, Any]:
    load = os.getloadavg()
    started = time.perf_counter()
    crawl_id = frontier.create_crawl(
        url, concurrency=CONCURRENCY, warc=str(place / "frontier.warc.gz")
    )
    hosts = frontier.fill(backend, url, crawl_id, pages, args.per_host)
    seeded = time.perf_counter() - started
    print(f"  seeded {pages:,} pages over {hosts:,} hosts in {seeded:.0f}s", flush=True)
    size = _size(url)
    latencies = _claims(url)
    progress = _progress(url, crawl_id)
    crawl = _crawl(url, site[1], args, place)
    if site[0].poll() is not None:
        raise RuntimeError("the demo server stopped during the crawl: no figure")
    return {
        "backend": backend.name,
        "pages": pages,
        "hosts": hosts,
        "workers": args.workers,
        "own_cluster": args.own_cluster,
        "seed_s": seeded,
        "database_mib": size,
        "claim_limit": CLAIM_LIMIT,
        "claim_p50_ms": statistics.median(latencies),
        "claim_p90_ms": statistics.quantiles(latencies, n=10)[-1],
        "claim_max_ms": max(latencies),
        "progress_s": progress,
        "load_at_start": load,
        "load_at_end": os.getloadavg(),
        **crawl,
    }


def _serve() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [str(PY), "-m", "trawl.demo.httpd", "--pages", str(SITE_PAGES)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    origin = json.loads(proc.stdout.readline())
    return proc, int(origin["main"].rsplit(":", 1)[1])


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _query(url: str, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """One row of *sql* (psycopg's ``%s`` style) on the database at *url*."""
    if _is_sqlite(url):
        path = sa.make_url(url).database or ""
        with contextlib.closing(sqlite3.connect(path)) as conn:
            return conn.execute(sql.replace("%s", "?").replace("%%", "%"), params).fetchone()
    dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchone()


def _size(url: str) -> float:
    """MiB of the database (on SQLite, its file and WAL)."""
    if _is_sqlite(url):
        path = Path(sa.make_url(url).database or "")
        files = [path, path.with_name(path.name + "-wal")]
        return sum(f.stat().st_size for f in files if f.exists()) / (1 << 20)
    row = _query(url, "SELECT pg_database_size(current_database())")
    return int(row[0]) / (1 << 20)


def _claims(url: str) -> list[float]:
    """Milliseconds per claim of CLAIM_LIMIT fetch jobs, each batch released untimed."""
    store = Store(url)
    gates = [TaskGate(name=FETCH_TASK, timeout=60.0)]
    times = []
    try:
        for n in range(WARMUP_CLAIMS + CLAIMS):
            started = time.perf_counter()
            jobs = claim(store, gates, CLAIM_LIMIT, "bench-frontier").jobs
            elapsed = (time.perf_counter() - started) * 1000
            if len(jobs) != CLAIM_LIMIT:
                raise RuntimeError(f"claimed {len(jobs)} jobs, expected {CLAIM_LIMIT}")
            commit(store, [_released(job) for job in jobs])
            if n >= WARMUP_CLAIMS:
                times.append(elapsed)
    finally:
        store.close()
    return times


def _released(job: ClaimedJob) -> AttemptResult:
    return AttemptResult(
        job_id=job.job_id,
        item_id=job.item_id,
        task=job.task,
        attempt=job.attempt,
        outcome=Outcome.RELEASED,
        version="1",
        ttl=None,
    )


def _progress(url: str, crawl_id: int) -> float:
    """Seconds for one progress count of the crawl, as ``trawl crawl show`` reads it."""
    store = Store(url)
    try:
        started = time.perf_counter()
        operations.progress(store, crawl_id)
        return time.perf_counter() - started
    finally:
        store.close()


_DB_STATS = (
    "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, blks_read, blks_hit,"
    " (SELECT wal_records FROM pg_stat_wal), (SELECT wal_fpi FROM pg_stat_wal),"
    " pg_current_wal_lsn() FROM pg_stat_database WHERE datname = current_database()"
)
_STATS = (
    "xact_commit",
    "tup_inserted",
    "tup_updated",
    "tup_deleted",
    "blks_read",
    "blks_hit",
    "wal_records",
    "wal_fpi",
)


def _crawl(url: str, port: int, args: Any, place: Path) -> dict[str, Any]:
    before = _stats(url)
    outs = [place / f"worker-{n}.json" for n in range(args.workers)]
    procs = [_worker(url, port, args.seconds, out) for out in outs]
    for proc in procs:
        if proc.wait() != 0:
            raise RuntimeError(f"a crawl worker exited with {proc.returncode}")
    time.sleep(1.5)  # the server's statistics arrive from each backend within a second
    after = _stats(url)
    workers = [json.loads(out.read_text()) for out in outs]
    started = min(w["started"] for w in workers)
    stopped = min(w["stopped"] for w in workers)
    counted = _attempts(url, started + WARMUP_S, stopped)
    window = stopped - started - WARMUP_S
    total = counted["all"] or 1
    summed = {
        k: sum(w[k] for w in workers) for k in ("statements", "rows", "transactions", "cpu_s")
    }
    row = {
        "crawl_s": stopped - started,
        "fetched": counted["all"],
        "fetched_in_window": counted["window"],
        "fetch_errors": counted["errors"],  # no response: a figure with many is not one
        "pages_per_s": counted["window"] / window,
        "worker_cpu_ms_per_page": 1000 * summed["cpu_s"] / total,
    }
    if _is_sqlite(url):  # the driver counts and the server's statistics are PostgreSQL's
        return row
    delta = {k: after[k] - before[k] for k in _STATS}
    return row | {
        "statements_per_page": summed["statements"] / total,
        "rows_sent_per_page": summed["rows"] / total,
        "transactions_per_page": summed["transactions"] / total,
        "commits_per_page": delta["xact_commit"] / total,
        "rows_inserted_per_page": delta["tup_inserted"] / total,
        "rows_updated_per_page": delta["tup_updated"] / total,
        "rows_deleted_per_page": delta["tup_deleted"] / total,
        "blocks_read_per_page": delta["blks_read"] / total,
        # the whole cluster's WAL (other databases' work too, unless --own-cluster): bytes,
        # records, and full-page images (a page's first change after a checkpoint logs
        # the whole 8 kB page)
        "wal_bytes_per_page_cluster": _wal_bytes(url, before["wal"], after["wal"]) / total,
        "wal_records_per_page_cluster": delta["wal_records"] / total,
        "wal_fpi_per_page_cluster": delta["wal_fpi"] / total,
    }


def _worker(url: str, port: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    argv = [str(PY), str(HERE / "apps" / "frontier_worker.py"), url, str(port)]
    argv += [str(CONCURRENCY), str(seconds), str(out)]
    return subprocess.Popen(argv, env=os.environ | {"PYTHONPATH": str(HERE)})


def _stats(url: str) -> dict[str, Any]:
    if _is_sqlite(url):
        return {}
    row = _query(url, _DB_STATS)
    return dict(zip(_STATS, (int(v) for v in row[:8]), strict=True)) | {"wal": row[8]}


def _wal_bytes(url: str, before: Any, after: Any) -> float:
    row = _query(url, "SELECT pg_wal_lsn_diff(%s, %s)", (str(after), str(before)))
    return float(row[0])


def _attempts(url: str, since: float, until: float) -> dict[str, int]:
    sql = (
        "SELECT count(*) FILTER (WHERE status_code IS NOT NULL AND url NOT LIKE '%%/robots.txt'),"
        " count(*) FILTER (WHERE status_code IS NOT NULL AND started_at >= %s AND started_at < %s),"
        " count(*) FILTER (WHERE status_code IS NULL)"
        " FROM crawl_attempts WHERE warc_file IS DISTINCT FROM 'seeded.warc.gz'"
    )
    if _is_sqlite(url):
        sql = sql.replace("IS DISTINCT FROM", "IS NOT")
    row = _query(url, sql, (since, until))
    return {"all": int(row[0]), "window": int(row[1]), "errors": int(row[2])}


def _line(row: dict[str, Any]) -> str:
    line = (
        f"{row['backend']} frontier {row['pages']:>10,} pages / {row['hosts']:>7,} hosts"
        f"  seed {row['seed_s']:6.0f}s  db {row['database_mib']:7,.0f} MiB"
        f"  claim p50 {row['claim_p50_ms']:6.2f} ms p90 {row['claim_p90_ms']:6.2f} ms"
        f"  progress {row['progress_s']:6.2f}s  {row['pages_per_s']:6.1f} pages/s"
        f"  {row['worker_cpu_ms_per_page']:4.1f} CPU ms/page"
    )
    if "statements_per_page" in row:
        line += (
            f"  {row['statements_per_page']:5.1f} stmts/page"
            f"  {row['transactions_per_page']:4.1f} tx/page"
            f"  {row['rows_inserted_per_page']:5.1f} ins/page"
            f"  {row['rows_updated_per_page']:5.1f} upd/page"
            f"  WAL(cluster) {row['wal_bytes_per_page_cluster'] / 1024:5.1f} KiB/page"
            f" ({row['wal_fpi_per_page_cluster']:4.1f} full pages)"
        )
    return line + f"  {row['fetch_errors']} errors  load {row['load_at_start'][0]:.1f}"


if __name__ == "__main__":
    sys.exit(main())
