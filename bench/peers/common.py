"""Shared by the peer scripts (run in bench/.peers-venv, never with trawl importable):
read the arguments, print one JSON result line per run.

``SCRIPT WORKLOAD JOBS TARGET [TARGET ...]``: one run per target, each a fresh database
the harness made (a PostgreSQL URL, or an SQLite file path for huey; ``-`` where the peer
keeps its queue elsewhere). One process does all runs of a row, so the interpreter and
the peer's imports are paid once, not once a run; no run's timed span includes them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=("enqueue-single", "enqueue-batch", "noop", "sleep"))
    parser.add_argument("jobs", type=int)
    parser.add_argument("targets", nargs="+", help="one fresh database per run")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=1)
    return parser.parse_args()


def report(jobs: int, seconds: float, **extra: object) -> None:
    """The line the harness reads for one run: jobs per second over the timed span."""
    print(json.dumps({"jobs": jobs, "seconds": seconds, "rate": jobs / seconds, **extra}))
    sys.stdout.flush()


class Span:
    """Wall time of a block."""

    def __enter__(self) -> Span:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started


class CpuSpan:
    """CPU seconds of a block: this process's, and a local server process's (a PostgreSQL
    backend, read from /proc; None when it cannot be read)."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid

    def __enter__(self) -> CpuSpan:
        self._client, self._server = time.process_time(), _process_seconds(self.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client = time.process_time() - self._client
        end = _process_seconds(self.pid)
        self.server = None if end is None or self._server is None else end - self._server


def _process_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
