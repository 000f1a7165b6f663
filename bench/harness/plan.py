"""How big each benchmark is: the full run, and the quick one for a change's first look."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Plan:
    name: str
    runs: int = 3  # every figure is the median of this many runs, with min and max
    process_jobs: int  # no-op jobs per processing run
    processes: tuple[int, ...] = (1, 2)
    # Async slots per worker process, which bound each claim's batch: 100, pgqueuer's
    # larger batch size in the peer comparison, so both move 100 jobs a round.
    concurrency: int = 100
    raw_batch: int = 100  # rows per claim and per complete in the raw-SQL baseline
    # trawl against pgqueuer on PostgreSQL (workloads/versus.py): jobs per run, so a run
    # lasts seconds, and rounds of one run each, alternating.
    versus_jobs: int = 20_000
    versus_rounds: int = 6
    # ``journal commits`` (workloads/journal.py, PostgreSQL): processes committing one
    # journal row a transaction at once, for this many seconds a run.
    journal_connections: int = 8
    journal_seconds: float = 5.0
    enqueue_batch: int  # items in one bulk add
    enqueue_single: int  # items added one call (one transaction) each
    # ``enqueue batch`` at scale (workloads/bulk.py): items in one file; None: not run.
    enqueue_large: int | None = None
    large_runs: int = 1  # a run of it takes half a minute: one, not ``runs``
    # ... except trawl against pgqueuer on PostgreSQL: this many rounds of a run each.
    bulk_rounds: int = 4
    claim_sizes: tuple[int, ...]  # jobs present but not due; the first is the baseline
    claim_due: int = 1_000  # due jobs, kept at this number while claims run
    claim_limit: int = 100
    claim_calls: int  # timed claims per run (each followed by an untimed release)


QUICK = Plan(
    name="quick",
    journal_seconds=3.0,
    process_jobs=5_000,
    enqueue_batch=5_000,
    enqueue_single=300,
    claim_sizes=(10_000, 100_000, 1_000_000),
    claim_calls=40,
)

FULL = Plan(
    name="full",
    process_jobs=20_000,
    enqueue_batch=20_000,
    enqueue_single=2_000,
    enqueue_large=1_000_000,
    versus_jobs=50_000,
    versus_rounds=8,
    claim_sizes=(10_000, 100_000, 1_000_000, 10_000_000),
    claim_calls=300,
)

# Seeding 10M not-due jobs took 84-87 s on SQLite and 84-98 s on PostgreSQL here (2 cores),
# and some GB of disk each; ``--no-10m`` leaves that size out.
HUGE_SIZE = 10_000_000


def human(n: int) -> str:
    """10000 -> '10k', 1000000 -> '1M'."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= size and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)
