"""The peer queues — pgqueuer, procrastinate, Celery (Redis), huey (SQLite) — each run by a
script in ``bench/peers/`` inside ``bench/.peers-venv`` (made on first use; trawl is not
importable there), plus the pgbench raw-SQL limit. One script call is one run in a fresh
database; it prints one JSON line with its rate."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

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
    script: str, workload: str, url: str, jobs: int, env: dict[str, str], **opts: int
) -> float:
    args = [str(venv_python()), str(PEERS / script), workload, url, str(jobs)]
    for name, value in opts.items():
        args += [f"--{name}", str(value)]
    done = subprocess.run(
        args, cwd=PEERS, env=os.environ | env, capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} {workload}: {done.stderr[-1500:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["rate"])


def _pg_url(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def measure(
    plan: Plan,
    backend: Backend,
    system: str,
    workload: str,
    variant: str,
    jobs: int,
    script_workload: str,
    params: dict[str, object],
    env: dict[str, str] | None = None,
    **opts: int,
) -> Row:
    rates = []
    script = f"{system}_peer.py"
    for i in range(plan.runs):
        if backend.name == "postgresql":
            with backend.database(f"peer_{system}") as url:
                rate = _call(script, script_workload, _pg_url(url), jobs, env or {}, **opts)
        else:
            with tempfile.TemporaryDirectory(prefix="bench-huey-") as tmp:
                extra = (env or {}) | {"BENCH_HUEY_DB": str(Path(tmp) / "huey.db")}
                rate = _call(script, script_workload, "-", jobs, extra, **opts)
        rates.append(rate)
        say(f"  {system} {backend.name} {workload} ({variant}) run {i + 1}: {rate:,.0f}/s")
    unit = "items/s" if workload.startswith("enqueue") else "jobs/s"
    return Row(
        system=system,
        backend=backend.name if system != "celery" else "redis",
        workload=workload,
        variant=variant,
        unit=unit,
        better="higher",
        runs=rates,
        params={"jobs": jobs, **params},
    )
