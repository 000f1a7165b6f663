"""Result rows: one measured figure (median, min, max of its runs) and its ratio to a baseline.

The row shape is the one ``bench/results/latest.json`` holds and the peer comparison will
extend (``ratio_to_best_peer`` is filled once peers are measured in the same run).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Better = Literal["higher", "lower"]


@dataclass(kw_only=True)
class Row:
    """One figure: a system on a backend doing a workload, measured ``len(runs)`` times."""

    system: str  # "trawl", "raw-sql"; later "pgqueuer", "procrastinate", ...
    backend: str  # "sqlite" or "postgresql"
    workload: str  # "process no-op", "enqueue batch", "enqueue single", "claim latency"
    variant: str  # what distinguishes rows of one workload: "2 processes", "1M not due"
    unit: str  # "jobs/s", "items/s", "ms"
    better: Better
    runs: list[float]
    params: dict[str, Any] = field(default_factory=dict)
    baseline: str | None = None  # key() of the row this one's ratio is against
    ratio: float | None = None
    ratio_to_best_peer: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # secondary figures, per run

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def key(self) -> str:
        return f"{self.system} | {self.backend} | {self.workload} | {self.variant}"

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(median=self.median, min=min(self.runs), max=max(self.runs))
        order = ("system", "backend", "workload", "variant", "unit", "median", "min", "max")
        return {k: data[k] for k in order} | {k: v for k, v in data.items() if k not in order}


def set_ratio(row: Row, baseline: Row | None) -> None:
    """``row / baseline`` on medians (for latencies too: 1M/10k > 1 means slower)."""
    if baseline is None or baseline.median == 0:
        return
    row.baseline = baseline.key()
    row.ratio = row.median / baseline.median


PEERS = ("pgqueuer", "procrastinate", "celery", "huey")


def set_best_peer(rows: list[Row]) -> None:
    """``ratio_to_best_peer``: the row's median over the best peer row's median for the same
    workload and backend (Celery's backend is Redis, so it is its own group). A row that
    has one already (measured in rounds against a peer, workloads/versus.py) keeps it."""
    for row in rows:
        if row.ratio_to_best_peer is not None:
            continue
        peers = [
            r
            for r in rows
            if r.system in PEERS and r.workload == row.workload and r.backend == row.backend
        ]
        if not peers:
            continue
        pick = max if row.better == "higher" else min
        best = pick(peers, key=lambda r: r.median)
        if best.median:
            row.ratio_to_best_peer = row.median / best.median
