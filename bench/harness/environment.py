"""What a run measured on: machine, versions, durability settings, the plan, errors."""

from __future__ import annotations

import dataclasses
import datetime
import os
import platform
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import workers
from harness.backends import SQLITE_PRAGMAS
from harness.plan import Plan
from harness.postgres import Server
from harness.progress import say

REPO = Path(__file__).resolve().parent.parent.parent
_postgres: dict[str, Any] = {}
LOAD_AT_START = os.getloadavg()  # other work on the machine makes figures noisy: say so


def compile_trawl(checkout: Path = REPO) -> None:
    """Write the bytecode of *checkout*'s trawl before anything is timed, as installing a
    package does: a development install (``pip install -e``) has none until an import
    writes it, and with PYTHONDONTWRITEBYTECODE set no import does, so every `trawl`
    command timed would compile trawl's modules from source first (7 % of a 2,000-page
    crawl's instructions under callgrind, 2026-12-07), which an installed trawl never
    does. The checkout's own ``.venv`` compiles it where it has one (a ``--before``)."""
    own = checkout / ".venv" / "bin" / "python"
    python = str(own) if own.exists() else sys.executable
    subprocess.run(
        [python, "-m", "compileall", "-q", "-j", "0", str(checkout / "src")],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def note_postgres(server: Server) -> None:
    """Record the server's settings; warn when durability is off (figures not comparable)."""
    settings = server.settings()
    where = (
        "BENCH_PG"
        if os.environ.get("BENCH_PG")
        else ("throwaway cluster" if server.cluster else "local server")
    )
    _postgres.update(settings, source=where)
    for name in ("fsync", "synchronous_commit"):
        if settings.get(name) != "on":
            say(f"warning: PostgreSQL has {name}={settings.get(name)}; durability is off")


def describe(plan: Plan, chosen: list[str], started: float, errors: list[str]) -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "elapsed_s": round(time.monotonic() - started, 1),
        "plan": dataclasses.asdict(plan),
        "backends": chosen,
        "git": _git(),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": _cpu(),
            "platform": platform.platform(),
            "loadavg_at_start": LOAD_AT_START,
            "loadavg_at_end": os.getloadavg(),
        },
        "python": sys.version.split()[0],
        "worker_driver": workers.driver(),
        "sqlite": {
            "version": sqlite3.sqlite_version,
            "pragmas": list(SQLITE_PRAGMAS),
            "synchronous": {"sqlite": "NORMAL", "sqlite-full": "FULL"},
        },
        "postgresql": dict(_postgres),
        "errors": errors,
    }


def _git() -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return done.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
