"""trawl-only workloads the peers cannot do.

- ``claim with limit keys``: jobs claimed per second through a keyed rate limit (a generous
  rate, so every claim is granted) with 1, 100 and 10,000 keys in use. A claim reads and
  writes the state of only its candidates' keys, so the figure must not fall as keys grow;
  the ratio is against 1 key.
- ``ttl requeue``: N results whose TTL has passed become claimable; timed from the first
  claim until every one was claimed (promotion plus claims), in jobs per second.
- ``version bump``: N results made by version 1; registering version 2 re-queues them in
  one UPDATE. Timed: the ``register_tasks`` call, in jobs per second.
"""

from __future__ import annotations

import statistics
import time

from harness.backends import Backend
from harness.plan import Plan, human
from harness.progress import say
from harness.rows import Row, set_ratio
from trawl.engine.claim import TaskGate, claim
from trawl.engine.commit import commit
from trawl.model.limits import make_limit
from trawl.model.records import AttemptResult, ClaimedJob, NewItem, TaskInfo
from trawl.model.states import Outcome
from trawl.store import migrate
from trawl.store.store import Store

TASK = "visit"
KEYS = (1, 100, 10_000)


def run(plan: Plan, backend: Backend) -> list[Row]:
    jobs = plan.enqueue_batch
    keyed = [_keys(plan, backend, keys, jobs) for keys in KEYS]
    for row in keyed[1:]:
        set_ratio(row, keyed[0])
    return [*keyed, _ttl(plan, backend, jobs * 5), _bump(plan, backend, jobs * 5)]


def _info(version: str = "1", ttl: float | None = None) -> TaskInfo:
    return TaskInfo(name=TASK, version=version, tags=("t",), ttl=ttl, timeout=300.0, retries=0)


def _fill(url: str, count: int, keys: int, ttl: float | None = None) -> Store:
    store = Store(url)
    migrate.upgrade(store.db)
    store.register_tasks([_info(ttl=ttl)])
    for start in range(0, count, 5000):
        store.add_items(
            [
                NewItem(id=f"i:{n}", tags=(("t", None),), data={"key": n % keys})
                for n in range(start, min(count, start + 5000))
            ]
        )
    return store


def _done(job: ClaimedJob, ttl: float | None = None) -> AttemptResult:
    return AttemptResult(
        job_id=job.job_id, item_id=job.item_id, task=job.task, attempt=job.attempt,
        outcome=Outcome.SUCCESS, version="1", ttl=ttl, result='{"ok":true}',
    )  # fmt: skip


def _keys(plan: Plan, backend: Backend, keys: int, jobs: int) -> Row:
    # a rate and burst no claim reaches: this measures the keys' bookkeeping, not throttling
    limit = make_limit("per-key", "1000000/s", burst=100_000, key=lambda item: item.data["key"])
    gate = TaskGate(name=TASK, timeout=300.0, limits=(limit,))
    runs = []
    for n in range(plan.runs):
        with backend.database(f"keys_{keys}_{n}") as url:
            store = _fill(url, jobs, keys)
            try:
                started, claimed = time.perf_counter(), 0
                while batch := claim(store, [gate], plan.claim_limit, "bench").jobs:
                    claimed += len(batch)
                    commit(store, [_done(j) for j in batch])
                runs.append(claimed / (time.perf_counter() - started))
            finally:
                store.close()
    say(f"  trawl {backend.name} claim+commit with {human(keys)} limit keys: "
        + ", ".join(f"{r:,.0f}" for r in runs) + " jobs/s")  # fmt: skip
    return Row(
        system="trawl", backend=backend.name, workload="claim with limit keys",
        variant=f"{human(keys)} keys", unit="jobs/s", better="higher", runs=runs,
        params={"jobs": jobs, "keys": keys, "batch": plan.claim_limit},
    )  # fmt: skip


def _ttl(plan: Plan, backend: Backend, jobs: int) -> Row:
    runs = []
    for n in range(plan.runs):
        with backend.database(f"ttl_{n}") as url:
            store = _fill(url, jobs, 1, ttl=1.0)
            try:
                _finish_all(store, jobs, ttl=2.0)  # every job done, due again soon
                time.sleep(2.1)
                started = time.perf_counter()
                claimed = _claim_all(store)
                runs.append(claimed / (time.perf_counter() - started))
            finally:
                store.close()
    say(f"  trawl {backend.name} ttl requeue: " + ", ".join(f"{r:,.0f}" for r in runs))
    return Row(
        system="trawl", backend=backend.name, workload="ttl requeue", variant=f"{human(jobs)}",
        unit="jobs/s", better="higher", runs=runs, params={"jobs": jobs},
    )  # fmt: skip


def _finish_all(store: Store, count: int, ttl: float | None = None) -> None:
    """Run every job once (with a short TTL they come due again while this still runs)."""
    finished = 0
    while finished < count and (jobs := store.claim({TASK: 300.0}, 1000, "bench")):
        commit(store, [_done(j, ttl) for j in jobs])
        finished += len(jobs)


def _claim_all(store: Store) -> int:
    """Claim until nothing is due (left leased: the database is thrown away)."""
    claimed = 0
    while jobs := store.claim({TASK: 300.0}, 1000, "bench"):
        claimed += len(jobs)
    return claimed


def _bump(plan: Plan, backend: Backend, jobs: int) -> Row:
    runs = []
    for n in range(plan.runs):
        with backend.database(f"bump_{n}") as url:
            store = _fill(url, jobs, 1)
            try:
                _finish_all(store, jobs)
                started = time.perf_counter()
                requeued = store.register_tasks([_info(version="2")])[TASK]
                runs.append(requeued / (time.perf_counter() - started))
            finally:
                store.close()
    say(f"  trawl {backend.name} version bump: " + ", ".join(f"{r:,.0f}" for r in runs))
    return Row(
        system="trawl", backend=backend.name, workload="version bump", variant=f"{human(jobs)}",
        unit="jobs/s", better="higher", runs=runs,
        params={"jobs": jobs, "median_s": statistics.median(jobs / r for r in runs)},
    )  # fmt: skip
