"""Claiming with rules: paused tasks, rate limits, dependencies and visit policies.

Tasks with none of these take the one-statement claim. The others are claimed from a window
of locked candidates: jobs whose dependencies have no valid result are parked until one
commits; jobs that cannot get a permit from every limit they are subject to move only their
``due_at`` (spread over the key's next free slots, so a throttled key's backlog steps aside
instead of being re-read by every claim); the rest are leased, all in one transaction.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trawl.engine import policy
from trawl.engine.ratelimit import decide
from trawl.engine.usercode import UserCodeTimeout, bounded
from trawl.model.limits import Limit, LimitItem
from trawl.model.records import ClaimedJob
from trawl.store.gates import Candidate
from trawl.store.store import Store

log = logging.getLogger("trawl.claim")

WINDOW_FACTOR = 2
MIN_WINDOW = 64
MAX_WINDOW = 1000
MAX_SCAN = 5000  # candidates one claim may look at before giving the database back


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskGate:
    """How one task is claimed."""

    name: str
    timeout: float
    limits: tuple[Limit, ...] = ()
    depends_on: tuple[str, ...] = ()
    weights: tuple[float, float, float] | None = None

    @property
    def gated(self) -> bool:
        return bool(self.limits or self.depends_on or self.weights)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimBatch:
    jobs: list[ClaimedJob]
    wake_at: float | None = None  # the earliest a deferred job becomes due


# A claim made inside a transaction, read once that transaction has committed.
Claimed = Callable[[], ClaimBatch]


@dataclass(kw_only=True, slots=True)
class _Permits:
    states: dict[tuple[str, str], float | None]
    changed: dict[tuple[str, str], float] = field(default_factory=dict)
    next_free: dict[tuple[str, str], float] = field(default_factory=dict)


def claim(store: Store, tasks: Sequence[TaskGate], limit: int, owner: str) -> ClaimBatch:
    """Lease up to *limit* due jobs of *tasks* by the rules above."""
    if not tasks or limit <= 0:
        return ClaimBatch(jobs=[])
    with store.write():
        now = store.clock()
        store.promote(now)
        plain = {t.name: t.timeout for t in tasks if not t.gated}  # the claim skips paused
        gated = [t for t in tasks if t.gated]
        if gated:
            paused = store.gates.paused([t.name for t in gated])
            gated = [t for t in gated if t.name not in paused]
        rows = store.claim_due(plain, limit, owner, now) if plain else []
        wake_at = None
        if gated and len(rows) < limit:
            leased, wake_at = _gated(store, gated, limit - len(rows), owner, now)
            rows += leased
            if not rows:  # say when throttled work comes due, so an idle worker waits for it
                later = store.gates.next_deferred([t.name for t in gated])
                wake_at = later if wake_at is None or (later and later < wake_at) else wake_at
        return ClaimBatch(jobs=store.claimed(rows), wake_at=wake_at)


def claim_later(store: Store, tasks: Sequence[TaskGate], limit: int, owner: str) -> Claimed:
    """:func:`claim` for a caller whose transaction goes on after it and who reads the batch
    only once that transaction has committed (a worker's commit and claim). When no task has
    rules, the claim is one statement whose rows nothing before the COMMIT needs: on
    PostgreSQL it then travels in the COMMIT's round trip instead of costing one of its own
    (and holds its row locks only while the server works). The result, called after the
    COMMIT, is the batch; called before it, it raises instead of losing leased jobs."""
    if not tasks or limit <= 0 or any(t.gated for t in tasks):
        batch = claim(store, tasks, limit, owner)
        return lambda: batch
    with store.write():
        now = store.clock()
        store.promote(now)
        rows = store.claim_due({t.name: t.timeout for t in tasks}, limit, owner, now, later=True)

    def read() -> ClaimBatch:
        if store.db.in_transaction:
            raise RuntimeError("a deferred claim is read once its transaction has committed")
        return ClaimBatch(jobs=store.claimed(rows))

    return read


def _gated(
    store: Store, tasks: list[TaskGate], room: int, owner: str, now: float
) -> tuple[list[object], float | None]:
    """Lease up to *room* gated jobs. Windows of candidates are read until the room is
    filled, the due jobs run out, or MAX_SCAN were looked at: deferred and parked jobs leave
    the due set at once, so the next window holds jobs not yet decided."""
    by_name = {t.name: t for t in tasks}
    window = min(MAX_WINDOW, max(room * WINDOW_FACTOR, MIN_WINDOW))
    rows: list[object] = []
    wake_at: float | None = None
    scanned = 0
    while room > 0 and scanned < MAX_SCAN:
        found, more = _candidates(store, tasks, window, room, now)
        scanned += len(found)
        ready = _drop_unmet(store, found, by_name, now)
        granted, deferred = _permits(store, ready, by_name, room, now)
        store.gates.defer(deferred)
        leased = store.lease([(c.id, by_name[c.task].timeout) for c in granted], owner, now)
        rows += leased
        room -= len(leased)
        wake_at = min(
            [w for w in (wake_at, *(u for _, u, _ in deferred)) if w is not None], default=None
        )
        if not more or len(granted) + len(deferred) + (len(found) - len(ready)) == 0:
            break
    return rows, wake_at


def _candidates(
    store: Store, tasks: list[TaskGate], window: int, room: int, now: float
) -> tuple[list[Candidate], bool]:
    """Due jobs to decide on, best first: a window of the tasks without a visit policy, in
    claim order, then each policy task's pools (round robin across such tasks, so one
    task's backlog does not take another's turn). Also whether more may be due."""
    plain = [t.name for t in tasks if t.weights is None]
    found = store.gates.candidates(plain, window, now) if plain else []
    more = len(found) == window
    chosen = [policy.select(store, t.name, t.weights, room, now) for t in tasks if t.weights]
    more = more or any(len(c) == room for c in chosen)
    found += [c for row in itertools.zip_longest(*chosen) for c in row if c is not None]
    return found, more


def _drop_unmet(
    store: Store, found: list[Candidate], tasks: dict[str, TaskGate], now: float
) -> list[Candidate]:
    deps = sorted({d for t in tasks.values() for d in t.depends_on})
    if not deps or not found:
        return found
    results = store.gates.dep_results(sorted({c.item_id for c in found}), deps)
    versions = store.gates.task_versions(deps)

    def met(c: Candidate) -> bool:
        for dep in tasks[c.task].depends_on:
            r = results.get((c.item_id, dep))
            if r is None or not r.succeeded or r.version != versions.get(dep):
                return False
            if r.expires_at is not None and r.expires_at <= now:
                return False
        return True

    unmet = {c.id for c in found if not met(c)}
    store.gates.wait_for_deps(sorted(unmet))
    return [c for c in found if c.id not in unmet]


def _permits(
    store: Store, found: list[Candidate], tasks: dict[str, TaskGate], room: int, now: float
) -> tuple[list[Candidate], list[tuple[int, float, str]]]:
    keyed = _all_keys(found, tasks)
    pairs = {p for ks in keyed.values() for _, p in ks}
    # Look before locking: a claim that can grant nothing (every key throttled) takes no row
    # lock, so it never holds up the worker that wakes for the next free permit.
    seen = store.gates.limit_states(pairs, now, lock=False)
    hopeful = any(all(_free(seen[p], lim, now) for lim, p in ks) for ks in keyed.values())
    permits = _Permits(states=store.gates.limit_states(pairs, now) if hopeful else seen)
    if hopeful:
        # Waiting for the lock can take as long as another worker's claim. A permit decided
        # at the time read before the wait would start its interval in the past, and the
        # next worker would be granted one at once: two permits back to back.
        now = store.clock()
    granted: list[Candidate] = []
    deferred: list[tuple[int, float, str]] = []
    for c in found:
        if len(granted) >= room:
            break
        until, why = _take(permits, keyed[c.id], now)
        if until is None:
            granted.append(c)
        else:
            deferred.append((c.id, until, why))
    if permits.changed:
        store.gates.save_limit_states(permits.changed)
    return granted, deferred


def _free(tat: float | None, lim: Limit, now: float) -> bool:
    return decide(tat, now, lim.interval, lim.burst).allowed


def _take(
    permits: _Permits, keys: list[tuple[Limit, tuple[str, str]]], now: float
) -> tuple[float | None, str]:
    """Take a permit from every limit, or none: returns (None, "") or (when to retry, why)."""
    decisions = [
        (lim, pair, decide(permits.states[pair], now, lim.interval, lim.burst))
        for lim, pair in keys
    ]
    denied = [(lim, pair, d) for lim, pair, d in decisions if not d.allowed]
    if not denied:
        for _, pair, d in decisions:
            permits.states[pair] = permits.changed[pair] = d.tat
        return None, ""
    until = 0.0
    for lim, pair, d in denied:
        slot = max(permits.next_free.get(pair, d.at), d.at)
        permits.next_free[pair] = slot + lim.interval  # the next deferred job takes the next
        until = max(until, slot)
    return until, f"limit:{denied[0][0].name}"


def _all_keys(
    found: list[Candidate], tasks: dict[str, TaskGate]
) -> dict[int, list[tuple[Limit, tuple[str, str]]]]:
    """Each candidate's (limit, key) pairs. Key functions are user code and the claim holds
    the database: they run together, with one time limit."""

    def compute() -> dict[int, list[tuple[Limit, tuple[str, str]]]]:
        return {c.id: _keys(c, tasks[c.task].limits) for c in found}

    if not any(lim.key is not None for t in tasks.values() for lim in t.limits):
        return compute()
    try:
        return bounded("limit key functions", compute)
    except UserCodeTimeout as error:
        log.warning("%s: this claim's jobs share one key per limit", error)
        return {
            c.id: [(lim, (lim.name, "<timeout>")) for lim in tasks[c.task].limits] for c in found
        }


def _keys(c: Candidate, limits: tuple[Limit, ...]) -> list[tuple[Limit, tuple[str, str]]]:
    return [(lim, (lim.name, _key(lim, c))) for lim in limits]


def _key(lim: Limit, c: Candidate) -> str:
    if lim.key is None:
        return ""
    try:
        return str(lim.key(LimitItem(id=c.item_id, data=c.data)))
    except Exception as error:
        # A key function that fails must not stall the claim; such jobs share one key.
        log.warning("key function of limit %s failed on %s: %s", lim.name, c.item_id, error)
        return "<error>"
