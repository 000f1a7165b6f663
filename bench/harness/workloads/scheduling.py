"""trawl-only workloads the peers cannot do.

- ``claim with limit keys``: jobs claimed per second through a keyed rate limit (a generous
  rate, so every claim is granted) with 1, 100 and 10,000 keys in use. A claim reads and
  writes the state of only its candidates' keys, so the figure must not fall as keys grow;
  the ratio is against 1 key.
- ``ttl requeue``: N results whose TTL has just passed (bulk-seeded: done, due, waiting in
  ``jobs_pending``); timed from the first claim until every one was claimed (promotion plus
  claims), in jobs per second.
- ``version bump``: N results made by version 1 (bulk-seeded); registering version 2
  re-queues them in one UPDATE. Timed: the ``register_tasks`` call, in jobs per second.
"""

from __future__ import annotations

import contextlib
import re
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from harness import seed, trawl_db
from harness.backends import Backend
from harness.plan import Plan, human
from harness.progress import say
from harness.rows import Row, set_ratio
from trawl.engine.claim import TaskGate, claim
from trawl.engine.commit import commit
from trawl.model.limits import Limit, make_limit
from trawl.model.records import AttemptResult, ClaimedJob
from trawl.model.states import Outcome
from trawl.store.store import Store

KEYS = (1, 100, 10_000)
RATE, BURST = "1000000/s", 100_000


def run(plan: Plan, backend: Backend) -> list[Row]:
    jobs = plan.enqueue_batch
    with _seeded(backend, seed.Kind.DUE, jobs) as template:
        with contextlib.closing(Store(template)) as store:
            store.register_limits([_limit(1)])  # the same name, rate and burst for every key
        keyed = [_keys(plan, backend, template, keys, jobs) for keys in KEYS]
    for row in keyed[1:]:
        set_ratio(row, keyed[0])
    return [*keyed, _ttl(plan, backend, jobs * 5), _bump(plan, backend, jobs * 5)]


def _done(job: ClaimedJob) -> AttemptResult:
    return AttemptResult(
        job_id=job.job_id, item_id=job.item_id, task=job.task, attempt=job.attempt,
        outcome=Outcome.SUCCESS, version="1", ttl=None, result='{"ok":true}',
    )  # fmt: skip


def _limit(keys: int) -> Limit:
    # a rate and burst no claim reaches: this measures the keys' bookkeeping, not throttling
    return make_limit("per-key", RATE, burst=BURST, key=lambda item: item.data["n"] % keys)


def _keys(plan: Plan, backend: Backend, template: str, keys: int, jobs: int) -> Row:
    gate = TaskGate(name=seed.TASK, timeout=300.0, limits=(_limit(keys),))

    def claim_and_commit_all(store: Store) -> int:
        claimed = 0
        while batch := claim(store, [gate], plan.claim_limit, "bench").jobs:
            claimed += len(batch)
            commit(store, [_done(j) for j in batch])
        return claimed

    what = f"claim+commit with {human(keys)} limit keys"
    runs = _rates(plan, backend, template, what, jobs, claim_and_commit_all)
    return Row(
        system="trawl", backend=backend.name, workload="claim with limit keys",
        variant=f"{human(keys)} keys", unit="jobs/s", better="higher", runs=runs,
        params={"jobs": jobs, "keys": keys, "batch": plan.claim_limit},
    )  # fmt: skip


def _ttl(plan: Plan, backend: Backend, jobs: int) -> Row:
    with _seeded(backend, seed.Kind.EXPIRED, jobs) as template:
        runs = _rates(plan, backend, template, "ttl requeue", jobs, _claim_all)
    return Row(
        system="trawl", backend=backend.name, workload="ttl requeue", variant=f"{human(jobs)}",
        unit="jobs/s", better="higher", runs=runs, params={"jobs": jobs},
    )  # fmt: skip


def _rates(
    plan: Plan, backend: Backend, template: str, what: str, jobs: int, act: Callable[[Store], int]
) -> list[float]:
    """Per run, on a fresh copy of *template*: jobs per second of ``act(store)``, which
    returns how many jobs it handled (all *jobs*, or the run is an error)."""
    runs = []
    for _ in range(plan.runs):
        with backend.clone(template, re.sub(r"\W+", "_", what)) as url:
            store = Store(url)
            try:
                started = time.perf_counter()
                handled = act(store)
                runs.append(handled / (time.perf_counter() - started))
            finally:
                store.close()
        if handled != jobs:
            raise RuntimeError(f"{what} handled {handled} of {jobs} jobs")
    say(f"  trawl {backend.name} {what}: " + ", ".join(f"{r:,.0f}" for r in runs) + " jobs/s")
    return runs


@contextlib.contextmanager
def _seeded(backend: Backend, kind: seed.Kind, jobs: int) -> Iterator[str]:
    """A template database with *jobs* results of the ``noop`` task (bulk SQL, not timed):
    each run gets a copy, so three runs cost one set-up."""
    with backend.database(f"sched_{kind.value}") as url:
        trawl_db.prepare(url)
        seed.fill(backend, url, [(kind, 1, jobs)])
        yield url


def _claim_all(store: Store) -> int:
    """Claim until nothing is due (left leased: the database is thrown away)."""
    claimed = 0
    gates = [TaskGate(name=seed.TASK, timeout=300.0)]
    while jobs := claim(store, gates, 1000, "bench").jobs:
        claimed += len(jobs)
    return claimed


def _bump(plan: Plan, backend: Backend, jobs: int) -> Row:
    bumped = replace(trawl_db.noop_app().tasks[seed.TASK].info(), version="2")
    with _seeded(backend, seed.Kind.DONE, jobs) as template:
        runs = _rates(
            plan, backend, template, "version bump", jobs,
            lambda store: store.register_tasks([bumped])[seed.TASK],
        )  # fmt: skip
    return Row(
        system="trawl", backend=backend.name, workload="version bump", variant=f"{human(jobs)}",
        unit="jobs/s", better="higher", runs=runs,
        params={"jobs": jobs, "median_s": statistics.median(jobs / r for r in runs)},
    )  # fmt: skip
