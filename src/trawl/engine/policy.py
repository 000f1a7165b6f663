"""Visit policies: which due jobs of a task go first when more is due than capacity (SWH).

A claim's room is shared between three pools by the task's weights (default 40/40/20):
jobs that never ran (oldest source activity first), re-runs whose source changed longest
after our last result (the largest lag), and re-runs due longest ago. Each pool is one
query over the task's whole due set (``store.pools``), as swh-scheduler's
``grab_next_visits`` does, so a large backlog in one pool cannot crowd out the others; a pool
that runs short leaves its share to the others.
"""

from __future__ import annotations

from trawl.store.gates import Candidate
from trawl.store.pools import Pool
from trawl.store.store import Store

Weights = tuple[float, float, float]
POOLS = (Pool.NEVER_RUN, Pool.LAGGING, Pool.OLDEST_DUE)
# A lagging job is a re-run, so also in the oldest-due pool; never-run jobs are in neither.
_OVERLAPS = {
    Pool.NEVER_RUN: (),
    Pool.LAGGING: (Pool.OLDEST_DUE,),
    Pool.OLDEST_DUE: (Pool.LAGGING,),
}


def shares(weights: Weights, room: int) -> list[int]:
    """*room* split by *weights*, largest remainders first, so the parts add up to *room*."""
    total = sum(weights)
    exact = [room * w / total for w in weights]
    parts = [int(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: exact[i] - parts[i], reverse=True)
    for i in by_remainder[: room - sum(parts)]:
        parts[i] += 1
    return parts


def select(store: Store, task: str, weights: Weights, room: int, now: float) -> list[Candidate]:
    """Up to *room* due jobs of *task*, each pool giving its share (inside the claim)."""
    picked: dict[int, tuple[Pool, Candidate]] = {}
    exhausted: set[Pool] = set()
    for pool, share in zip(POOLS, shares(weights, room), strict=True):
        _take(store, task, pool, share, picked, exhausted, now)
    for pool in POOLS:  # shares a short pool left over go to the others, in order
        if len(picked) >= room:
            break
        if pool not in exhausted:
            _take(store, task, pool, room - len(picked), picked, exhausted, now)
    return [c for _, c in picked.values()]


def _take(
    store: Store,
    task: str,
    pool: Pool,
    count: int,
    picked: dict[int, tuple[Pool, Candidate]],
    exhausted: set[Pool],
    now: float,
) -> None:
    """Add up to *count* jobs of *pool* not yet picked. A pool may hold jobs an overlapping
    pool gave already, so read as many more as that pool (and this one) gave."""
    if count <= 0:
        return
    asked = count + sum(1 for p, _ in picked.values() if p is pool or p in _OVERLAPS[pool])
    found = store.pools.candidates(task, pool, asked, now)
    if len(found) < asked:
        exhausted.add(pool)
    for c in found:
        if count == 0:
            break
        if c.id not in picked:
            picked[c.id] = (pool, c)
            count -= 1
