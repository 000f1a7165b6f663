"""Counters a worker keeps for progress display and its exit summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(kw_only=True, slots=True)
class WorkerStats:
    started: float = field(default_factory=time.monotonic)
    claimed: int = 0
    done: int = 0
    failed: int = 0
    released: int = 0
    stale: int = 0
    running: int = 0

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return (self.done + self.failed) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        return (
            f"done {self.done}  failed {self.failed}  running {self.running}  "
            f"stale {self.stale}  {self.rate():.1f}/s"
        )
