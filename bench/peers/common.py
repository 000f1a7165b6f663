"""Shared by the peer scripts (run in bench/.peers-venv, never with trawl importable):
read the arguments, print one JSON result line."""

from __future__ import annotations

import argparse
import json
import sys
import time


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=("enqueue-single", "enqueue-batch", "noop", "sleep"))
    parser.add_argument("url")
    parser.add_argument("jobs", type=int)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=1)
    return parser.parse_args()


def report(jobs: int, seconds: float, **extra: object) -> None:
    """The one line the harness reads: jobs per second over the timed span."""
    print(json.dumps({"jobs": jobs, "seconds": seconds, "rate": jobs / seconds, **extra}))
    sys.stdout.flush()


class Span:
    """Wall time of a block."""

    def __enter__(self) -> Span:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
