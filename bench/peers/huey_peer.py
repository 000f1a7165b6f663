"""huey with SQLite storage (WAL, with the synchronous level trawl gets in the same run,
``BENCH_SQLITE_SYNC``): enqueue one by one (huey has no bulk enqueue and commits each
enqueue, so both enqueue rows are per job); process by a ``huey_consumer`` subprocess, timed
from the first job leaving the queue until it is empty. Each run's target is the path of
a fresh database file."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

from common import Span, arguments, report
from huey import SqliteHuey
from huey.storage import SqliteStorage

SYNCHRONOUS = os.environ.get("BENCH_SQLITE_SYNC", "NORMAL")


class SyncLevelStorage(SqliteStorage):
    """huey's SQLite storage at the synchronous level trawl runs with (huey's own default
    leaves SQLite's FULL in place; its ``fsync`` flag offers only FULL or OFF)."""

    def _create_connection(self):  # type: ignore[no-untyped-def]
        conn = super()._create_connection()
        conn.execute(f"pragma synchronous={SYNCHRONOUS}")
        return conn


def make_huey(filename: str):  # type: ignore[no-untyped-def]
    """A huey on *filename* and its ``noop`` task."""
    huey = SqliteHuey(
        "bench", filename=filename, storage_class=SyncLevelStorage, journal_mode="wal", timeout=60
    )

    @huey.task(name="noop")
    def noop(sleep: bool = False) -> None:
        if sleep:
            time.sleep(0.01)

    return huey, noop


# What the consumer imports (``huey_peer.huey``): the database of the run it serves.
huey, _ = make_huey(os.environ.get("BENCH_HUEY_DB", "huey.db"))


def main() -> None:
    args = arguments()
    for path in args.targets:
        run(args, path)


def run(args, path: str) -> None:  # type: ignore[no-untyped-def]
    _, noop = make_huey(path)
    sleep = args.workload == "sleep"
    with Span() as span:
        for _ in range(args.jobs):
            noop(sleep) if sleep else noop()
    if args.workload.startswith("enqueue"):
        return report(args.jobs, span.seconds)
    consumer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "huey.bin.huey_consumer",
            "huey_peer.huey",
            "-k",
            "thread",
            "-w",
            str(args.concurrency),
            "-q",
        ],
        cwd=os.path.dirname(os.path.abspath(__file__)),
        env=os.environ | {"BENCH_HUEY_DB": path},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        seconds, counted = _drain(path, args.jobs)
    finally:
        consumer.terminate()
        consumer.wait(30)
    report(counted, seconds, worker_type="thread")


def _pending(path: str) -> int:
    """Queue length read on a short-lived connection of our own (huey's shared one, polled
    in a loop, starved the consumer's writes to ~10 jobs/s)."""
    conn = sqlite3.connect(path, timeout=60)
    try:
        return int(
            conn.execute("SELECT count(*) FROM task WHERE queue = ?", ("bench",)).fetchone()[0]
        )
    finally:
        conn.close()


def _drain(path: str, jobs: int) -> tuple[float, int]:
    start = None
    started_at = jobs
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        left = _pending(path)
        if start is None and left < jobs:
            start, started_at = time.perf_counter(), left
        if left == 0:
            return time.perf_counter() - (start or time.perf_counter()), started_at
        time.sleep(0.02)
    raise SystemExit("huey did not drain its queue in 900 s")


if __name__ == "__main__":
    import huey_peer  # tasks must be registered under the module name the consumer imports

    huey_peer.main()
