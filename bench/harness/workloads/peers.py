"""The peer queues — pgqueuer, procrastinate, Celery (Redis), huey (SQLite) — each run by a
script in ``bench/peers/`` inside ``bench/.peers-venv`` (made on first use; trawl is not
importable there), plus the pgbench raw-SQL limit. One script call does every run of a row,
each in a fresh database, and prints one JSON line with its rate per run."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row

BENCH = Path(__file__).resolve().parent.parent.parent
VENV = BENCH / ".peers-venv"
PEERS = BENCH / "peers"
PACKAGES = ("pgqueuer", "asyncpg", "procrastinate", "celery[redis]", "huey", "psycopg[binary]")
SYSTEMS = ("pgqueuer", "procrastinate", "celery", "huey")
SLEEP_CONCURRENCY = 16  # in-flight jobs for ``process sleep 10ms``, every system


def venv_python() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        say("  creating bench/.peers-venv (pip install pgqueuer procrastinate celery huey)")
        subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", *PACKAGES], check=True)
    return python


def versions() -> dict[str, str]:
    done = subprocess.run(
        [str(venv_python()), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    wanted = {"pgqueuer", "asyncpg", "procrastinate", "celery", "kombu", "redis", "huey"}
    return {p["name"]: p["version"] for p in json.loads(done.stdout) if p["name"] in wanted}


def _call(
    script: str, workload: str, targets: list[str], jobs: int, env: dict[str, str], **opts: int
) -> list[dict[str, Any]]:
    """One script process for all runs of a row; one result per target (run): ``rate``,
    and where the script measures them ``cpu_s`` and ``server_cpu_s``."""
    args = [str(venv_python()), str(PEERS / script), workload, str(jobs), *targets]
    for name, value in opts.items():
        args += [f"--{name}", str(value)]
    done = subprocess.run(
        args, cwd=PEERS, env=os.environ | env, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} {workload}: {done.stderr[-1500:]}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if len(lines) != len(targets):
        raise RuntimeError(f"{script} {workload}: {len(lines)} results for {len(targets)} runs")
    return [json.loads(line) for line in lines]


def _pg_url(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@dataclass(frozen=True, kw_only=True)
class PeerRow:
    """One row a peer script measures: what it is called in the table and how it runs."""

    system: str
    workload: str  # the table's name: "process no-op", "enqueue batch", ...
    variant: str
    jobs: int
    script: str  # the script's workload: "noop", "sleep", "enqueue-single", "enqueue-batch"
    params: dict[str, object] = field(default_factory=dict)  # recorded in the row
    batch: int | None = None
    concurrency: int | None = None

    def options(self) -> dict[str, int]:
        given = {"batch": self.batch, "concurrency": self.concurrency}
        return {name: value for name, value in given.items() if value is not None}


def run_once(backend: Backend, peer: PeerRow) -> dict[str, Any]:
    """One run of a PostgreSQL peer row on a fresh database: its script's result line."""
    with backend.database(f"peer_{peer.system}") as url:
        (result,) = _call(
            f"{peer.system}_peer.py", peer.script, [_pg_url(url)], peer.jobs, {}, **peer.options()
        )
    return result


def measure(plan: Plan, backend: Backend, peer: PeerRow, env: dict[str, str] | None = None) -> Row:
    """``plan.runs`` runs of one peer row, each on a database of its own."""
    system = peer.system
    script = f"{system}_peer.py"
    env = dict(env or {})
    with contextlib.ExitStack() as stack:
        if system == "celery":
            targets = ["-"] * plan.runs  # its queue is in Redis, emptied before each run
        elif backend.dialect == "postgresql":
            targets = [
                _pg_url(stack.enter_context(backend.database(f"peer_{system}")))
                for _ in range(plan.runs)
            ]
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-huey-")))
            targets = [str(tmp / f"huey-{i}.db") for i in range(plan.runs)]
            env["BENCH_SQLITE_SYNC"] = backend.synchronous or "NORMAL"
        rates = [
            float(r["rate"])
            for r in _call(script, peer.script, targets, peer.jobs, env, **peer.options())
        ]
    for i, rate in enumerate(rates):
        say(
            f"  {system} {backend.name} {peer.workload} ({peer.variant}) run {i + 1}: {rate:,.0f}/s"
        )
    return Row(
        system=system,
        backend=backend.name if system != "celery" else "redis",
        workload=peer.workload,
        variant=peer.variant,
        unit="items/s" if peer.workload.startswith("enqueue") else "jobs/s",
        better="higher",
        runs=rates,
        params={"jobs": peer.jobs, **peer.params},
    )
