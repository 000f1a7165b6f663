"""procrastinate (psycopg 3): defer one by one or with ``batch_defer_async``; drain N jobs with
``run_worker_async(concurrency=C, wait=False)``."""

from __future__ import annotations

import argparse
import asyncio

import procrastinate
from common import Span, arguments, report


async def main() -> None:
    args = arguments()
    for url in args.targets:
        await run(args, url)


async def run(args: argparse.Namespace, url: str) -> None:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    sleep = args.workload == "sleep"

    @app.task(name="noop")
    async def noop() -> None:
        if sleep:
            await asyncio.sleep(0.01)

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        if args.workload == "enqueue-single":
            with Span() as span:
                for _ in range(args.jobs):
                    await noop.defer_async()
            return report(args.jobs, span.seconds)
        with Span() as span:
            await noop.batch_defer_async(*[{} for _ in range(args.jobs)])
        if args.workload == "enqueue-batch":
            return report(args.jobs, span.seconds)
        with Span() as span:
            await app.run_worker_async(
                concurrency=args.concurrency, wait=False, install_signal_handlers=False
            )
        left = await app.connector.execute_query_one_async(
            "SELECT count(*) AS n FROM procrastinate_jobs WHERE status <> 'succeeded'"
        )
        if left["n"]:
            raise SystemExit(f"procrastinate left {left['n']} jobs")
        report(args.jobs, span.seconds)


if __name__ == "__main__":
    asyncio.run(main())
