"""``api add`` and ``api read``: the HTTP API (`trawl serve`, one uvicorn process) measured
beside what it wraps, in the same run on the same database kind.

``api add`` posts the enqueue batch's items with ``trawl.Client.add_items`` (10,000 a
request, the server's limit), timed from the first request to the last answer; its
baseline is ``trawl add --file`` on the same items (the enqueue workload's CLI row,
measured again here so the two are back to back). ``api read`` is the latency of
``GET /items/{id}`` from one client, one request at a time, over random ids of 5,000
items (p50; p99 in ``extra``); its baseline is ``Store.get_item`` in-process on the same
items, so the ratio is what HTTP, the token check and JSON add to a lookup.
"""

from __future__ import annotations

import json
import random
import socket
import statistics
import subprocess
import time
from collections.abc import Callable

from harness import trawl_db, workers
from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row, set_ratio
from harness.seed import TAG
from harness.workloads import enqueue
from trawl.client import Client
from trawl.model.records import NewItem
from trawl.store.store import Store

ADD = "api add"
READ = "api read"
READ_ITEMS = 5_000
READS = 2_000  # quick: a quarter

Reader = Callable[[str, list[str]], list[float]]  # (url, ids) -> seconds per read


def run(plan: Plan, backend: Backend) -> list[Row]:
    cli = enqueue.measure(
        plan, backend, ADD, "trawl", "trawl add --file", plan.enqueue_batch, enqueue.cli
    )
    over_http = enqueue.measure(
        plan, backend, ADD, "trawl", "POST /items, 10k a request", plan.enqueue_batch, _post
    )
    set_ratio(over_http, cli)
    reads = READS if plan.name == "full" else READS // 4
    local = _latency(plan, backend, "Store.get_item in-process", reads, _local_reads)
    remote = _latency(plan, backend, "GET /items/{id}", reads, _http_reads)
    set_ratio(remote, local)
    return [cli, over_http, local, remote]


def _post(url: str, items: list[tuple[str, str]]) -> float:
    with _server(url) as (base, token), Client(base, token=token, timeout=300) as client:
        body = [{"id": i, "tags": [TAG], "data": json.loads(d)} for i, d in items]
        started = time.perf_counter()
        client.add_items(body)
        return time.perf_counter() - started


def _latency(plan: Plan, backend: Backend, variant: str, reads: int, measure: Reader) -> Row:
    medians, p99s = [], []
    for i in range(plan.runs):
        with backend.database("api") as url:
            trawl_db.prepare(url)
            ids = [f"bench:{n}" for n in range(READ_ITEMS)]
            with Store(url) as store:
                store.add_items([NewItem(id=x, tags=((TAG, None),), data={"n": 1}) for x in ids])
            rng = random.Random(i)
            seconds = measure(url, [rng.choice(ids) for _ in range(reads)])
        ms = sorted(s * 1000 for s in seconds)
        medians.append(statistics.median(ms))
        p99s.append(ms[int(len(ms) * 0.99) - 1])
        say(f"  trawl {backend.name} {READ} ({variant}) run {i + 1}: p50 {medians[-1]:.2f} ms")
    return Row(
        system="trawl",
        backend=backend.name,
        workload=READ,
        variant=variant,
        unit="ms",
        better="lower",
        runs=medians,
        params={"items": READ_ITEMS, "reads": reads},
        extra={"p99_ms": p99s},
    )


def _local_reads(url: str, ids: list[str]) -> list[float]:
    taken = []
    with Store(url) as store:
        for item_id in ids:
            started = time.perf_counter()
            store.get_item(item_id)
            taken.append(time.perf_counter() - started)
    return taken


def _http_reads(url: str, ids: list[str]) -> list[float]:
    taken = []
    with _server(url) as (base, token), Client(base, token=token) as client:
        client.item(ids[0])  # the connection and the token check, before the clock
        for item_id in ids:
            started = time.perf_counter()
            client.item(item_id)
            taken.append(time.perf_counter() - started)
    return taken


class _server:
    """``trawl serve`` on a free port with a fresh write token, stopped on exit."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> tuple[str, str]:
        with Store(self.url) as store:
            name = f"bench-{time.monotonic_ns()}"
            token = store.tokens.create(name, "write", store.clock())
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        command = [str(workers.VENV_BIN / "trawl"), "--db", self.url, "serve", "--port", str(port)]
        command += ["--log-level", "warning"]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    _, err = self.proc.communicate()
                    why = err.decode()[-2000:]
                    raise RuntimeError(f"trawl serve did not start: {why}") from None
                time.sleep(0.05)
        return base, token

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
