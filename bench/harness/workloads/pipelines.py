"""``pipeline no-op`` and ``pipeline claim``: remote pipelines through one tracker.

``pipeline no-op`` processes the no-op jobs of ``process no-op`` with worker processes that
claim and commit through one ``trawl serve`` (``trawl worker --server``), beside local
workers on the same kind of database in the same run: one local worker (the baseline), one
remote, two remote, and one of each on one database. The figure is the steady rate between
the first and the last commit (from ``result_at``), and every run checks each job was
committed exactly once.

``pipeline claim`` is the round trip of one claim through the tracker (claim one job,
release it with the next claim, so the due set keeps its size), p50 in ms with p99 in
``extra``; its baseline is the same commit-and-claim transaction in-process.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import time
from typing import Any

from harness import seed, trawl_db, workers
from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row, set_ratio
from harness.trawl_db import NOOP_APP
from harness.workloads import process
from harness.workloads.claim import released
from trawl.engine import claim as engine_claim
from trawl.model import wire
from trawl.runtime.backend import commit_and_claim
from trawl.store.store import Store

WORKLOAD = "pipeline no-op"
CLAIM = "pipeline claim"
CLAIMS = 400  # quick: a quarter
SETUPS = [  # (label, local workers, remote workers)
    ("1 local worker", 1, 0),
    ("1 remote worker", 0, 1),
    ("2 remote workers", 0, 2),
    ("1 local + 1 remote", 1, 1),
]


def run(plan: Plan, backend: Backend) -> list[Row]:
    with process._template(backend, plan.process_jobs) as template:
        rows = [_noop(plan, backend, template, *setup) for setup in SETUPS]
    for row in rows[1:]:
        set_ratio(row, rows[0])
    claims = CLAIMS if plan.name == "full" else CLAIMS // 4
    local = _claims(plan, backend, "commit-and-claim in-process", claims, _local_claims)
    remote = _claims(plan, backend, "claim through the tracker", claims, _remote_claims)
    set_ratio(remote, local)
    return [*rows, local, remote]


def _noop(plan: Plan, backend: Backend, template: str, label: str, local: int, remote: int) -> Row:
    rates = []
    for i in range(plan.runs):
        with backend.clone(template, "pipelines") as url, _Tracker(url) as tracker:
            procs = [_local(url, plan.concurrency) for _ in range(local)]
            procs += [tracker.worker(f"r{n}", plan.concurrency) for n in range(remote)]
            for proc in procs:
                _wait(proc)
            rate = process._steady_rate(backend, url, plan.process_jobs)
        say(f"  trawl {backend.name} {WORKLOAD} ({label}) run {i + 1}: {rate:,.0f} jobs/s")
        rates.append(rate)
    return Row(
        system="trawl",
        backend=backend.name,
        workload=WORKLOAD,
        variant=label,
        unit="jobs/s",
        better="higher",
        runs=rates,
        params={"jobs": plan.process_jobs, "concurrency": plan.concurrency},
    )


def _claims(plan: Plan, backend: Backend, variant: str, claims: int, measure: Any) -> Row:
    medians, p99s = [], []
    for i in range(plan.runs):
        with backend.database("pipeline_claim") as url:
            trawl_db.prepare(url)
            seed.fill(backend, url, [(seed.Kind.DUE, 1, 1_000)])
            ms = sorted(s * 1000 for s in measure(url, claims))
        medians.append(statistics.median(ms))
        p99s.append(ms[int(len(ms) * 0.99) - 1])
        say(f"  trawl {backend.name} {CLAIM} ({variant}) run {i + 1}: p50 {medians[-1]:.2f} ms")
    return Row(
        system="trawl",
        backend=backend.name,
        workload=CLAIM,
        variant=variant,
        unit="ms",
        better="lower",
        runs=medians,
        params={"claims": claims, "due": 1_000},
        extra={"p99_ms": p99s},
    )


def _local_claims(url: str, claims: int) -> list[float]:
    gates = [engine_claim.TaskGate(name="noop", timeout=300.0)]
    taken, held = [], []
    with Store(url) as store:
        for _ in range(claims + 20):
            started = time.perf_counter()
            _, batch = commit_and_claim(
                store,
                [released(j) for j in held],
                1,
                None,
                lambda s, n: engine_claim.claim_later(s, gates, n, "bench"),
                ["noop"],
                "bench",
            )
            taken.append(time.perf_counter() - started)
            held = batch.jobs
    return taken[20:]


def _remote_claims(url: str, claims: int) -> list[float]:
    with _Tracker(url) as tracker:
        return asyncio.run(tracker.claims(claims))


def _local(url: str, concurrency: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        workers.command(url, concurrency),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(proc: subprocess.Popen[str]) -> None:
    _, stderr = proc.communicate(timeout=workers.TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"worker exit {proc.returncode}: {stderr[-2000:]}")


class _Tracker:
    """``trawl serve`` on a free port, with pipelines made on demand; stopped on exit."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.tokens: dict[str, str] = {}

    def __enter__(self) -> _Tracker:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        trawl = str(workers.VENV_BIN / "trawl")
        command = [trawl, "--db", self.url, "serve", "--port", str(self.port)]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    raise RuntimeError("trawl serve did not start") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

    def token(self, name: str) -> str:
        if name not in self.tokens:
            with Store(self.url) as store:
                self.tokens[name] = store.pipelines.create(
                    name, tags=[], match_only=False, slots=10_000, now=store.clock()
                )
        return self.tokens[name]

    def worker(self, name: str, concurrency: int) -> subprocess.Popen[str]:
        command = [
            str(workers.VENV_BIN / "trawl"),
            "worker",
            str(NOOP_APP),
            "--server",
            f"ws://127.0.0.1:{self.port}",
            "--pipeline",
            name,
            "--exit-when-idle",
            "--concurrency",
            str(concurrency),
            "--no-progress",
        ]
        env = {k: v for k, v in os.environ.items() if k != "TRAWL_DB"}
        env["TRAWL_PIPELINE_TOKEN"] = self.token(name)
        return subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    async def claims(self, claims: int) -> list[float]:
        from websockets.asyncio.client import connect

        headers = {"X-Trawl-Pipeline": "claims", "Authorization": f"Bearer {self.token('claims')}"}
        hello = {
            "v": wire.VERSION,
            "protocol": wire.PROTOCOL,
            "slots": 1,
            "owner": "bench:1:x",
            "tasks": [{"name": "noop", "version": "1", "timeout": 300, "tags": ["noop"]}],
        }
        taken, held = [], []
        async with connect(
            f"ws://127.0.0.1:{self.port}{wire.PATH}", additional_headers=headers
        ) as ws:
            await ws.send(json.dumps(hello))
            await ws.recv()  # the welcome
            for seq in range(claims + 20):
                results = [{**j, "outcome": "released", "version": "1"} for j in held]
                frame = {"type": "claim", "seq": seq, "request": {"limit": 1, "results": results}}
                started = time.perf_counter()
                await ws.send(json.dumps(frame))
                reply = json.loads(await ws.recv())
                taken.append(time.perf_counter() - started)
                held = [
                    {k: j[k] for k in ("job_id", "item_id", "task", "attempt")}
                    for j in reply["payload"]["jobs"]
                ]
        return taken[20:]
