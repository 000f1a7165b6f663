"""What a run in rounds records beside its rate: the CPU it cost a job (or an item), on the
client and in PostgreSQL, as a dict ``{"rate", "cpu_us", "server_cpu_us"}``; shared by the
rounds against pgqueuer (workloads/versus.py, workloads/bulk.py)."""

from __future__ import annotations

import statistics
from typing import Any

from harness.backends import Backend
from harness.progress import say
from harness.rows import Row
from harness.workloads import peers

Run = dict[str, Any]


def peer_run(backend: Backend, peer: peers.PeerRow, count: int) -> Run:
    """One run of a PostgreSQL peer row on a fresh database, with what its script measured."""
    result = peers.run_once(backend, peer)
    server = result.get("server_cpu_s")
    return {
        "rate": float(result["rate"]),
        "cpu_us": per_unit(result["cpu_s"], count),
        "server_cpu_us": None if server is None else per_unit(server, count),
    }


def per_unit(seconds: float, count: int) -> float:
    """CPU seconds for *count* jobs or items, in µs each."""
    return round(seconds / count * 1e6, 2)


def total(run: Run) -> float | None:
    """Client plus server CPU a job, when the server's could be read."""
    server = run["server_cpu_us"]
    return None if server is None else float(run["cpu_us"] + server)


def cpu_ratio(trawl: list[Run], other: list[Run]) -> float | None:
    """The peer's median CPU a job over trawl's: above 1, trawl costs less a job."""
    mine = [t for t in map(total, trawl) if t is not None]
    theirs = [o for o in map(total, other) if o is not None]
    if not mine or not theirs:
        return None
    return statistics.median(theirs) / statistics.median(mine)


def compare(row: Row, trawl: list[Run], other: list[Run], label: str, per: str) -> None:
    """Give trawl's *row* the median of its rounds' ratios to *other* (the peer's run of
    each round) as its ratio, and the CPU ratio; say both (*per*: "a job", "an item")."""
    ratios = [t["rate"] / o["rate"] for t, o in zip(trawl, other, strict=True)]
    row.extra["round_ratios"] = [round(r, 3) for r in ratios]
    row.ratio_to_best_peer = statistics.median(ratios)  # the rounds', not the medians'
    cpu = cpu_ratio(trawl, other)
    if cpu is not None:
        row.extra["cpu_ratio"] = round(cpu, 3)
    say(
        f"  {label} / pgqueuer: {row.ratio_to_best_peer:.2f}x by rate (median of"
        f" {len(ratios)} rounds, {min(ratios):.2f}-{max(ratios):.2f})"
        + (f", {cpu:.2f}x by CPU {per}" if cpu is not None else "")
    )
