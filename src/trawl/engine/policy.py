"""Visit policies: which due jobs of a task go first when more is due than capacity (SWH).

Shares of the batch (default 40/40/20): jobs that never ran (oldest ``last_update`` first,
when items carry one), then the largest lag (the source changed longest after our last
result), then the oldest due. The choice is made within the claim's window of candidates.
"""

from __future__ import annotations

from collections.abc import Mapping

from trawl.store.gates import Candidate

Weights = tuple[float, float, float]


def order(
    found: list[Candidate], weights: Mapping[str, Weights | None], room: int
) -> list[Candidate]:
    """*found* reordered so that tasks with a policy fill *room* by their shares."""
    if not any(weights.get(c.task) for c in found):
        return found
    ordered: list[Candidate] = []
    for task in dict.fromkeys(c.task for c in found):
        mine = [c for c in found if c.task == task]
        share = weights.get(task)
        ordered += _by_shares(mine, share, room) if share else mine
    return ordered


def _by_shares(found: list[Candidate], weights: Weights, room: int) -> list[Candidate]:
    total = sum(weights)
    never = sorted((c for c in found if not c.ever_run), key=_oldest_update)
    lagging = sorted((c for c in found if c.ever_run), key=_lag, reverse=True)
    oldest = sorted(found, key=lambda c: c.due_at)
    picked: dict[int, Candidate] = {}
    for pool, weight in zip((never, lagging, oldest), weights, strict=True):
        quota = round(room * weight / total)
        for c in pool:
            if quota <= 0:
                break
            if c.id not in picked:
                picked[c.id] = c
                quota -= 1
    rest = [c for c in found if c.id not in picked]  # fill what a short pool left over
    return list(picked.values()) + rest


def _oldest_update(c: Candidate) -> tuple[bool, float]:
    return (c.last_update is None, c.last_update or 0.0)


def _lag(c: Candidate) -> float:
    if c.last_update is None or c.result_at is None:
        return 0.0
    return c.last_update - c.result_at
