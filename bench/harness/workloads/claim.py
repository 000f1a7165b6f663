"""``claim latency`` and ``claim throughput`` with many jobs present but not due.

Per size, a fresh database gets N jobs that are done with a TTL ten years away (present, not
due) and a fixed number of due jobs, by bulk SQL (not timed).

- latency: one ``Store.claim(limit=100)`` call. Each timed claim is followed by an untimed
  commit that releases the batch (due again at once), so the due set keeps its size. A run
  is ``claim_calls`` claims after a short warm-up; its figure is their median.
- throughput: jobs leased per second by one connection that claims 100 and commits them
  (released, so the due set keeps its size) in one transaction, as a busy worker does, for
  ``claim_calls`` rounds, all timed.

The runs share the database (seeding 1M rows three times would dwarf the measurement). The
ratio is against the smallest size, measured in the same run.
"""

from __future__ import annotations

import statistics
import time

from harness import seed, trawl_db
from harness.backends import Backend
from harness.plan import Plan, human
from harness.progress import say
from harness.rows import Row, set_ratio
from trawl.engine.claim import TaskGate, claim
from trawl.engine.commit import commit
from trawl.model.records import AttemptResult, ClaimedJob
from trawl.model.states import Outcome
from trawl.store.store import Store

WORKLOAD = "claim latency"
THROUGHPUT = "claim throughput"
WARMUP = 20


def run(plan: Plan, backend: Backend, sizes: tuple[int, ...]) -> list[Row]:
    pairs = [_size(plan, backend, size) for size in sizes]
    latency, throughput = [p[0] for p in pairs], [p[1] for p in pairs]
    for rows in (latency, throughput):
        for row in rows[1:]:
            set_ratio(row, rows[0])
    return latency + throughput


def _size(plan: Plan, backend: Backend, size: int) -> tuple[Row, Row]:
    with backend.database(f"claim_{human(size).lower()}") as url:
        started = time.perf_counter()
        _seed(backend, url, size, plan.claim_due)
        say(
            f"  {backend.name}: seeded {human(size)} not-due + {plan.claim_due} due jobs "
            f"in {time.perf_counter() - started:.1f}s"
        )
        store = Store(url)
        try:
            _claims(store, plan, WARMUP)
            runs = [_claims(store, plan, plan.claim_calls) for _ in range(plan.runs)]
            rates = [_rounds(store, plan) for _ in range(plan.runs)]
        finally:
            store.close()
    medians = [statistics.median(r) for r in runs]
    say(
        f"  trawl {backend.name} claim with {human(size)} not due: "
        + ", ".join(f"{m:.2f}" for m in medians)
        + " ms; "
        + ", ".join(f"{r:,.0f}" for r in rates)
        + " jobs/s"
    )
    params = {
        "not_due": size,
        "due": plan.claim_due,
        "limit": plan.claim_limit,
        "calls_per_run": plan.claim_calls,
    }
    throughput = Row(
        system="trawl",
        backend=backend.name,
        workload=THROUGHPUT,
        variant=f"{human(size)} not due",
        unit="jobs/s",
        better="higher",
        runs=rates,
        params=params,
    )
    return Row(
        system="trawl",
        backend=backend.name,
        workload=WORKLOAD,
        variant=f"{human(size)} not due",
        unit="ms",
        better="lower",
        runs=medians,
        params=params,
        extra={"p90_ms": [_p90(r) for r in runs], "max_ms": [max(r) for r in runs]},
    ), throughput


def _seed(backend: Backend, url: str, size: int, due: int) -> None:
    trawl_db.prepare(url)
    seed.fill(backend, url, [(seed.Kind.DONE, 1, size), (seed.Kind.DUE, size + 1, due)])


def _claims(store: Store, plan: Plan, calls: int) -> list[float]:
    """Time *calls* claims, releasing each batch untimed; returns milliseconds each."""
    leases = [TaskGate(name=seed.TASK, timeout=300.0)]
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        jobs = claim(store, leases, plan.claim_limit, "bench").jobs
        times.append((time.perf_counter() - started) * 1000)
        if len(jobs) != plan.claim_limit:
            raise RuntimeError(f"claimed {len(jobs)} jobs, expected {plan.claim_limit}")
        commit(store, [released(job) for job in jobs])
    return times


def _rounds(store: Store, plan: Plan) -> float:
    """Claim and release ``claim_calls`` batches, each in one transaction; jobs per second."""
    leases = [TaskGate(name=seed.TASK, timeout=300.0)]
    jobs: list[ClaimedJob] = claim(store, leases, plan.claim_limit, "bench").jobs
    claimed = 0
    started = time.perf_counter()
    for _ in range(plan.claim_calls):
        with store.unit():
            commit(store, [released(job) for job in jobs])
            jobs = claim(store, leases, plan.claim_limit, "bench").jobs
        claimed += len(jobs)
    elapsed = time.perf_counter() - started
    commit(store, [released(job) for job in jobs])
    return claimed / elapsed


def released(job: ClaimedJob) -> AttemptResult:
    return AttemptResult(
        job_id=job.job_id,
        item_id=job.item_id,
        task=job.task,
        attempt=job.attempt,
        outcome=Outcome.RELEASED,
        version="1",
        ttl=None,
    )


def _p90(times: list[float]) -> float:
    return statistics.quantiles(times, n=10)[-1]
