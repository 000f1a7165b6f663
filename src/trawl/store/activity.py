"""What is going on now, as the dashboard shows it: workers holding leases, the journal's
flow since a seq, its most recent entries, and a crawl's recent requests by host.

Every read here is bounded by an index range (a task's running jobs, journal seqs after a
cursor, a crawl's attempts after a time), never a scan of a whole large table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trawl.model.records import JournalEntry
from trawl.store.connection import Database
from trawl.store.crawls import SLOT_HELD
from trawl.store.reads import journal_entry
from trawl.store.sql import q


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerLease:
    """A worker as the database sees it: the jobs it holds and when its leases lapse."""

    owner: str
    running: int
    lease_until: float  # the earliest lease end among its jobs
    tasks: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class JournalFlow:
    """Entries after a seq, counted by (task, kind); *last* is the newest seq counted."""

    last: int
    counts: dict[tuple[str | None, str], int]


@dataclass(frozen=True, kw_only=True, slots=True)
class HostActivity:
    """A host a crawl made requests to recently, with its shared politeness state."""

    host: str
    requests: int  # since the window began
    errors: int  # of those, failed or answered 429/5xx
    last_at: float
    in_flight: int
    next_at: float | None  # its next request may start then
    blocked_until: float | None
    errors_in_row: int


_RUNNING = (
    "SELECT owner, task, count(*) AS n, min(due_at) AS until FROM jobs"
    " WHERE task IN ({tasks}) AND status = 'running' GROUP BY owner, task"
)
_FLOW = q(
    "SELECT task, kind, count(*) AS n, max(seq) AS last FROM journal WHERE seq > :after"
    " AND seq <= :upto GROUP BY task, kind"
)
_RECENT = (
    "SELECT seq, at, kind, item_id, task, detail FROM journal"
    " WHERE seq < :before AND seq > :floor {filter} ORDER BY seq DESC LIMIT :limit"
)
_CRAWL_REQUESTS = q(
    "SELECT count(*) FROM crawl_attempts WHERE crawl_id = :crawl AND started_at >= :since"
)
_CRAWL_HOSTS = q(
    "SELECT host, count(*) AS n, max(started_at) AS last_at,"
    " sum(CASE WHEN error IS NOT NULL OR status_code = 429 OR status_code >= 500"
    " THEN 1 ELSE 0 END) AS errors"
    " FROM crawl_attempts WHERE crawl_id = :crawl AND started_at >= :since"
    " GROUP BY host ORDER BY n DESC, host LIMIT :limit"
)
_HOST_STATE = "SELECT host, next_at, blocked_until, errors FROM crawl_hosts WHERE host IN ({hosts})"
_IN_FLIGHT = (
    "SELECT s.key, count(*) AS n FROM crawl_slots s"
    f" WHERE s.key IN ({{keys}}) AND s.until > :now AND {SLOT_HELD} GROUP BY s.key"
)


def _marks(prefix: str, values: list[Any]) -> tuple[str, dict[str, Any]]:
    names = [f"{prefix}{n}" for n in range(len(values))]
    return ", ".join(f":{n}" for n in names), dict(zip(names, values, strict=True))


class Activity:
    """Reads of current activity; each runs in the caller's transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def workers(self, tasks: list[str]) -> list[WorkerLease]:
        """Owners of running jobs of *tasks* (each task one range of its status index)."""
        if not tasks:
            return []
        marks, params = _marks("t", tasks)
        found: dict[str, tuple[int, float, list[str]]] = {}
        for r in self.db.execute(q(_RUNNING.format(tasks=marks)), params):
            running, until, names = found.get(r.owner or "?", (0, float("inf"), []))
            names.append(r.task)
            found[r.owner or "?"] = (running + int(r.n), min(until, r.until or until), names)
        return [
            WorkerLease(owner=owner, running=n, lease_until=until, tasks=tuple(sorted(names)))
            for owner, (n, until, names) in sorted(found.items())
        ]

    def last_seq(self) -> int:
        """The journal's end as a cursor: its settled horizon (an entry committed later
        comes after it)."""
        return self.db.journal_horizon()

    def flow(self, after: int, upto: int) -> JournalFlow:
        """Entries with seq in (after, upto], counted by task and kind."""
        counts: dict[tuple[str | None, str], int] = {}
        last = after
        for r in self.db.execute(_FLOW, {"after": after, "upto": upto}):
            counts[(r.task, r.kind)] = int(r.n)
            last = max(last, int(r.last))
        return JournalFlow(last=last, counts=counts)

    def recent(
        self,
        *,
        before: int,
        window: int,
        limit: int,
        kind: str | None = None,
        task: str | None = None,
        item_id: str | None = None,
    ) -> list[JournalEntry]:
        """Entries newest first with seq below *before*, looking back at most *window* seqs
        (so a rare filter costs a bounded range of the journal, not all of it)."""
        filters: list[str] = []
        # the window is the seqs before-window .. before-1
        params: dict[str, Any] = {"before": before, "floor": before - window - 1, "limit": limit}
        for column, value in (("kind", kind), ("task", task), ("item_id", item_id)):
            if value is not None:
                filters.append(f"AND {column} = :{column}")
                params[column] = value
        stmt = q(_RECENT.format(filter=" ".join(filters)))
        return [journal_entry(r) for r in self.db.execute(stmt, params)]

    def crawl_requests(self, crawl_id: int, since: float) -> int:
        """Fetch attempts the crawl started since *since*."""
        params = {"crawl": crawl_id, "since": since}
        return int(self.db.execute(_CRAWL_REQUESTS, params).scalar_one())

    def crawl_hosts(
        self, crawl_id: int, since: float, now: float, limit: int
    ) -> list[HostActivity]:
        """The hosts the crawl made most requests to since *since*, with their politeness
        state (shared by every crawl) and requests in flight."""
        params = {"crawl": crawl_id, "since": since, "limit": limit}
        recent = self.db.execute(_CRAWL_HOSTS, params).all()
        if not recent:
            return []
        hosts = [r.host for r in recent]
        marks, by_host = _marks("h", hosts)
        state = {r.host: r for r in self.db.execute(q(_HOST_STATE.format(hosts=marks)), by_host)}
        keys, by_key = _marks("k", [f"host:{h}" for h in hosts])
        stmt = q(_IN_FLIGHT.format(keys=keys))
        flying = {r.key: int(r.n) for r in self.db.execute(stmt, {**by_key, "now": now})}
        return [_host(r, state.get(r.host), flying.get(f"host:{r.host}", 0)) for r in recent]


def _host(r: Any, state: Any, in_flight: int) -> HostActivity:
    return HostActivity(
        host=r.host,
        requests=int(r.n),
        errors=int(r.errors or 0),
        last_at=r.last_at,
        in_flight=in_flight,
        next_at=None if state is None else state.next_at,
        blocked_until=None if state is None else state.blocked_until,
        errors_in_row=0 if state is None else int(state.errors),
    )
