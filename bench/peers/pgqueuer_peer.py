"""pgqueuer (asyncpg): enqueue one by one or in one call; drain N jobs with one QueueManager
at a given batch size (``QueueExecutionMode.drain``)."""

from __future__ import annotations

import argparse
import asyncio
from datetime import timedelta

import asyncpg
from common import CpuSpan, Span, arguments, report
from pgqueuer import QueueManager
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode


async def main() -> None:
    args = arguments()
    for url in args.targets:
        await run(args, url)


async def run(args: argparse.Namespace, url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await measure(args, conn)
    finally:
        await conn.close()


async def measure(args: argparse.Namespace, conn: asyncpg.Connection) -> None:
    queries = Queries(AsyncpgDriver(conn))
    await queries.install()
    if args.workload == "enqueue-single":
        with Span() as span:
            for _ in range(args.jobs):
                await queries.enqueue("noop", None)
        return report(args.jobs, span.seconds)
    # Its one connection is its one backend: the server's CPU for the run is that process's.
    backend = await conn.fetchval("SELECT pg_backend_pid()")
    with Span() as span, CpuSpan(backend) as cpu:
        await queries.enqueue(["noop"] * args.jobs, [None] * args.jobs, [0] * args.jobs)
    if args.workload == "enqueue-batch":
        return report(args.jobs, span.seconds, cpu_s=cpu.client, server_cpu_s=cpu.server)
    qm = QueueManager(queries)
    sleep = args.workload == "sleep"

    @qm.entrypoint("noop")
    async def noop(job: Job) -> None:
        if sleep:
            await asyncio.sleep(0.01)

    limit = args.concurrency if args.concurrency >= 2 * args.batch else None
    with Span() as span, CpuSpan(backend) as cpu:
        await qm.run(
            dequeue_timeout=timedelta(seconds=0.2),
            batch_size=args.batch,
            mode=QueueExecutionMode.drain,
            max_concurrent_tasks=limit,
        )
    left = await conn.fetchval("SELECT count(*) FROM pgqueuer")
    if left:
        raise SystemExit(f"pgqueuer left {left} jobs")
    report(args.jobs, span.seconds, cpu_s=cpu.client, server_cpu_s=cpu.server)


if __name__ == "__main__":
    asyncio.run(main())
