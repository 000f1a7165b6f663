"""Claiming for a keyed actor: only the due jobs whose item gives the actor's launch key.

The key is a Python function of the item, so the claim reads a window of the task's best
due jobs (locked on PostgreSQL, skipping other claims' locks), keeps those with the key and
leases them, in one transaction. The orchestrator starts actors for the keys it sees in the
same window (:data:`KEY_WINDOW`), so every actor it starts has work within reach.
"""

from __future__ import annotations

from collections.abc import Callable

from trawl.engine.claim import ClaimBatch
from trawl.engine.usercode import bounded
from trawl.store.store import Store

KEY_WINDOW = 500

KeyOf = Callable[[str, dict[str, object]], str]  # (item id, item data) -> launch key


def claim_keyed(
    store: Store, *, task: str, timeout: float, key_of: KeyOf, key: str, limit: int, owner: str
) -> ClaimBatch:
    """Lease up to *limit* due jobs of *task* whose launch key is *key*, best first."""
    if limit <= 0:
        return ClaimBatch(jobs=[])
    with store.write():
        now = store.clock()
        store.promote(now)
        if store.gates.paused([task]):
            return ClaimBatch(jobs=[])
        found = store.gates.candidates([task], KEY_WINDOW, now)
        # The launch key function is user code, run while the claim holds the database.
        keys = bounded(
            "the actor's key function", lambda: [key_of(c.item_id, c.data) for c in found]
        )
        mine = [(c.id, timeout) for c, k in zip(found, keys, strict=True) if k == key]
        return ClaimBatch(jobs=store.claimed(store.lease(mine[:limit], owner, now)))
