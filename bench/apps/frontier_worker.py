"""A crawl worker for ``bench/frontier``, as ``trawl worker trawl.crawl.app:app`` runs one,
for a fixed time: ``python frontier_worker.py DB_URL PORT CONCURRENCY SECONDS OUT.json``.

Two things only the benchmark does here:

- every ``*.frontier.test`` host name resolves to 127.0.0.1 and the demo server's PORT (an
  aiohttp resolver installed in this process, as an ``/etc/hosts`` entry per host would,
  with the port as well). Nothing leaves the machine; DNS lookups cost nothing, where a
  real broad crawl pays one per host.
- the statements the process sends to the database are counted at the driver (psycopg's
  ``execute``/``executemany``, which both the hot path and SQLAlchemy go through), with the
  transactions (BEGINs) among them, so the write cost of a page can be given per page.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import socket
import sys
import time
from typing import Any

import aiohttp.connector
import psycopg
from aiohttp.abc import AbstractResolver, ResolveResult

from trawl.crawl import state
from trawl.crawl.app import make_app
from trawl.runtime.worker import Worker

DOMAIN = ".frontier.test"
COUNTS = {"statements": 0, "rows": 0, "transactions": 0}


def resolver_for(port: int) -> type[AbstractResolver]:
    class FrontierResolver(AbstractResolver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        async def resolve(
            self, host: str, port_asked: int = 0, family: int = socket.AF_INET
        ) -> list[ResolveResult]:
            if not host.endswith(DOMAIN):
                raise OSError(f"bench/frontier resolves only *{DOMAIN}, not {host}")
            return [
                ResolveResult(
                    hostname=host,
                    host="127.0.0.1",
                    port=port,
                    family=socket.AF_INET,
                    proto=0,
                    flags=socket.AI_NUMERICHOST,
                )
            ]

        async def close(self) -> None:
            pass

    return FrontierResolver


def count_statements() -> None:
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def counted(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        COUNTS["statements"] += 1
        COUNTS["rows"] += 1
        if isinstance(query, str) and query.lstrip().upper().startswith("BEGIN"):
            COUNTS["transactions"] += 1
        return execute(self, query, params, **kwargs)

    def counted_many(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        params_seq = list(params_seq)
        COUNTS["statements"] += 1
        COUNTS["rows"] += len(params_seq)
        return executemany(self, query, params_seq, **kwargs)

    psycopg.Cursor.execute = counted  # type: ignore[method-assign,assignment]
    psycopg.Cursor.executemany = counted_many  # type: ignore[method-assign,assignment]


async def work(url: str, concurrency: int, seconds: float) -> dict[str, float]:
    worker = Worker(make_app(url), url=url, concurrency=concurrency, poll=0.1, grace=10.0)
    started = time.time()
    running = asyncio.create_task(worker.run())
    await asyncio.wait([running], timeout=seconds)
    stopped = time.time()
    worker.stop()
    await running
    await state.shutdown()
    return {"started": started, "stopped": stopped, "ended": time.time()}


def main() -> int:
    url, port, concurrency, seconds, out = sys.argv[1:6]
    logging.basicConfig(level=logging.WARNING)
    aiohttp.connector.DefaultResolver = resolver_for(int(port))  # type: ignore[misc]
    count_statements()
    times = asyncio.run(work(url, int(concurrency), float(seconds)))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result = times | COUNTS | {"cpu_s": usage.ru_utime + usage.ru_stime}
    with open(out, "w") as file:
        json.dump(result, file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
