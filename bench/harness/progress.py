"""Progress lines on stderr, so stdout carries only the table."""

from __future__ import annotations

import sys
import time

_START = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - _START:6.1f}s] {message}", file=sys.stderr, flush=True)
