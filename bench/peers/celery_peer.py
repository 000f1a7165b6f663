"""Celery with Redis: enqueue with ``delay`` (one by one; "batch" shares one producer
connection, Celery has no bulk enqueue); process by a ``celery worker`` subprocess, timed
from the first job leaving the queue until the queue and the unacked set are empty."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

import redis
from celery import Celery
from common import Span, arguments, report

QUEUE = os.environ.get("BENCH_CELERY_QUEUE", "bench")
app = Celery("celery_peer", broker=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/0"))
app.conf.update(task_ignore_result=True, task_default_queue=QUEUE, worker_hijack_root_logger=False)


@app.task(name="noop")
def noop(sleep: bool = False) -> None:
    if sleep:
        time.sleep(0.01)


def main() -> None:
    args = arguments()
    for _ in args.targets:  # the queue lives in Redis: each run empties it first
        run(args)


def run(args: argparse.Namespace) -> None:
    r = redis.Redis.from_url(app.conf.broker_url)
    r.delete(QUEUE, "unacked", "unacked_index")
    sleep = args.workload == "sleep"
    with Span() as span:
        if args.workload == "enqueue-batch":
            with app.producer_or_acquire() as producer:
                for _ in range(args.jobs):
                    noop.apply_async(producer=producer)
        else:
            for _ in range(args.jobs):
                noop.delay(sleep) if sleep else noop.delay()
    if args.workload.startswith("enqueue"):
        r.delete(QUEUE)
        return report(args.jobs, span.seconds)
    pool = ["-P", "threads"] if sleep else ["-P", "prefork"]
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "celery_peer",
            "worker",
            *pool,
            "-c",
            str(args.concurrency),
            "-Q",
            QUEUE,
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "WARNING",
        ],
        cwd=os.path.dirname(os.path.abspath(__file__)),
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        seconds, counted = _drain(r, args.jobs)
    finally:
        # The measurement is over and the queue empty: kill the worker and its pool at once
        # (a warm shutdown of the prefork pool took seconds per run).
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(30)
    report(counted, seconds, pool=pool[1])


def _drain(r: redis.Redis, jobs: int) -> tuple[float, int]:
    """Poll the queue: time from its first decrease until it and the unacked set are empty."""
    start = None
    started_at = jobs
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        left = r.llen(QUEUE)
        if start is None and left < jobs:
            start, started_at = time.perf_counter(), left
        if left == 0 and r.hlen("unacked") == 0:
            return time.perf_counter() - (start or time.perf_counter()), started_at
        time.sleep(0.005)
    raise SystemExit("celery did not drain its queue in 900 s")


if __name__ == "__main__":
    main()
