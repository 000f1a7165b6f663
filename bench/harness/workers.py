"""Worker processes: ``trawl worker APP --exit-when-idle`` when the CLI has it, else the same
Worker driven by ``apps/run_worker.py``. Either way, real separate processes."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness.trawl_db import APPS, NOOP_APP

VENV_BIN = Path(sys.executable).parent
TIMEOUT = 900.0


@functools.cache
def cli_options() -> frozenset[str] | None:
    """The options ``trawl worker --help`` lists, or None when the CLI cannot run a worker."""
    trawl = VENV_BIN / "trawl"
    try:
        done = subprocess.run(
            [str(trawl), "worker", "--help"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or "--exit-when-idle" not in done.stdout:
        return None
    return frozenset(w.strip(",") for w in done.stdout.split() if w.startswith("--"))


def driver() -> str:
    return "trawl worker (CLI)" if cli_options() is not None else "apps/run_worker.py"


def command(url: str, concurrency: int, app: str = NOOP_APP, connections: int = 1) -> list[str]:
    """The worker's command line (``--connections`` only where it is not the default)."""
    options = cli_options()
    if options is None:
        return [sys.executable, str(APPS / "run_worker.py"), app, url, str(concurrency)]
    extra = ["--no-progress"] if "--no-progress" in options else []
    if connections != 1:
        extra += ["--connections", str(connections)]
    return [
        str(VENV_BIN / "trawl"),
        "--db",
        url,
        "worker",
        app,
        "--exit-when-idle",
        "--concurrency",
        str(concurrency),
        *extra,
    ]


def run(
    url: str,
    processes: int,
    concurrency: int,
    app: str = NOOP_APP,
    connections: int = 1,
    on_start: Callable[[list[int]], None] | None = None,
) -> float:
    """Start *processes* workers at once and wait for all to exit; returns the wall time.
    *on_start* gets their process ids once they are started."""
    env = os.environ | {"TRAWL_DB": url}
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            command(url, concurrency, app, connections),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    if on_start is not None:
        on_start([p.pid for p in procs])
    errors = [_wait(p) for p in procs]
    wall = time.perf_counter() - started
    failed = [e for e in errors if e is not None]
    if failed:
        raise RuntimeError("worker failed:\n" + "\n".join(failed))
    return wall


def _wait(proc: subprocess.Popen[str]) -> str | None:
    try:
        _, stderr = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        return f"timed out after {TIMEOUT:.0f}s: {stderr[-2000:]}"
    if proc.returncode != 0:
        return f"exit {proc.returncode}: {stderr[-2000:]}"
    return None
