"""What gated claims read and write: candidates, dependency results, limit states, deferrals.

Tasks with rate limits, dependencies or a visit policy are claimed in two steps inside one
transaction: read (and lock) a window of candidates, let the engine decide per job, then
lease the chosen ones and move only ``due_at`` for the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from trawl.store import codec
from trawl.store.connection import Database
from trawl.store.sql import q


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    id: int
    item_id: str
    task: str
    ever_run: bool
    due_at: float
    result_at: float | None
    last_update: float | None
    data: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class DepResult:
    item_id: str
    task: str
    succeeded: bool
    version: str | None
    expires_at: float | None


def candidate(r: Any) -> Candidate:
    """A row with the columns of :data:`CANDIDATE_COLUMNS` as a Candidate."""
    return Candidate(
        id=r.id,
        item_id=r.item_id,
        task=r.task,
        ever_run=bool(r.ever_run),
        due_at=r.due_at,
        result_at=r.result_at,
        last_update=r.last_update,
        data=codec.loads(r.data),
    )


CANDIDATE_COLUMNS = (
    "j.id, j.item_id, j.task, j.ever_run, j.due_at, j.result_at, i.last_update, i.data"
)


def _in(db: Database, name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``IN (...)`` over a list: a JSON array on SQLite, an array on PostgreSQL."""
    if db.is_sqlite:
        return f"IN (SELECT value FROM json_each(:{name}))", {name: codec.dumps(list(values))}
    return f"= ANY(:{name})", {name: list(values)}


# (limit, key) pairs arrive as arrays (PostgreSQL) or a JSON array of pairs (SQLite), so each
# step is one statement whatever the number of keys a claim touches.
# (SQLite needs the WHERE to parse INSERT ... SELECT ... ON CONFLICT.)
_PAIRS_SQLITE = (
    "SELECT value ->> 0 AS name, value ->> 1 AS key, value ->> 2 AS tat FROM json_each(:pairs)"
    " WHERE true"
)
_PAIRS_POSTGRES = (
    "SELECT * FROM unnest(CAST(:names AS text[]), CAST(:keys AS text[]),"
    " CAST(:tats AS float8[])) AS p(name, key, tat)"
)
_STATE_INIT = "INSERT INTO limit_state (name, key, tat) {pairs} ON CONFLICT (name, key) DO NOTHING"
_STATE_SAVE = (
    "INSERT INTO limit_state (name, key, tat) {pairs}"
    " ON CONFLICT (name, key) DO UPDATE SET tat = excluded.tat"
)
_STATE_READ = (
    "SELECT s.name, s.key, s.tat FROM limit_state s"
    " JOIN ({pairs}) AS p ON p.name = s.name AND p.key = s.key {suffix}"
)


def _pairs(
    db: Database, rows: Sequence[tuple[str, str, float | None]]
) -> tuple[str, dict[str, Any]]:
    if db.is_sqlite:
        return _PAIRS_SQLITE, {"pairs": codec.dumps([list(r) for r in rows])}
    names, keys, tats = ([r[i] for r in rows] for i in range(3))
    return _PAIRS_POSTGRES, {"names": names, "keys": keys, "tats": tats}


_DEFER = q("UPDATE jobs SET due_at = :until, ready = false, waiting = :why WHERE id = :id")
_WAIT = q("UPDATE jobs SET due_at = NULL, ready = false, waiting = 'deps' WHERE id = :id")


class Gates:
    """The claim's gates: pauses, candidates, dependencies, rate-limit states, deferrals."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def paused(self, names: Sequence[str]) -> set[str]:
        clause, params = _in(self.db, "names", names)
        stmt = q(f"SELECT name FROM tasks WHERE paused AND name {clause}")
        return set(self.db.execute(stmt, params).scalars())

    def candidates(self, tasks: Sequence[str], window: int, now: float) -> list[Candidate]:
        """The best due jobs of *tasks*, locked (PostgreSQL) without waiting on others' locks."""
        heads = []
        params: dict[str, Any] = {"now": now, "window": window}
        lock = "" if self.db.is_sqlite else "FOR UPDATE SKIP LOCKED"
        for i, task in enumerate(tasks):
            params[f"t{i}"] = task
            heads.append(
                f"""SELECT * FROM (SELECT id FROM jobs
                    WHERE task = :t{i} AND ready AND due_at <= :now
                    ORDER BY niceness, ever_run, due_at LIMIT :window {lock}) AS h{i}"""
            )
        stmt = q(
            f"""
            SELECT {CANDIDATE_COLUMNS}
            FROM jobs j JOIN items i ON i.id = j.item_id
            WHERE j.id IN ({" UNION ALL ".join(heads)})
            ORDER BY j.niceness, j.ever_run, j.due_at
            """
        )
        return [candidate(r) for r in self.db.execute(stmt, params)]

    def dep_results(
        self, item_ids: Sequence[str], tasks: Sequence[str]
    ) -> dict[tuple[str, str], DepResult]:
        items_in, params = _in(self.db, "items", item_ids)
        tasks_in, more = _in(self.db, "tasks", tasks)
        stmt = q(
            "SELECT item_id, task, succeeded, result_version, expires_at FROM jobs"
            f" WHERE item_id {items_in} AND task {tasks_in}"
        )
        return {
            (r.item_id, r.task): DepResult(
                item_id=r.item_id,
                task=r.task,
                succeeded=bool(r.succeeded),
                version=r.result_version,
                expires_at=r.expires_at,
            )
            for r in self.db.execute(stmt, params | more)
        }

    def task_versions(self, names: Sequence[str]) -> dict[str, str]:
        clause, params = _in(self.db, "names", names)
        stmt = q(f"SELECT name, version FROM tasks WHERE name {clause}")
        return dict(self.db.execute(stmt, params).tuples().all())

    def limit_states(
        self, pairs: Iterable[tuple[str, str]], now: float, *, lock: bool = True
    ) -> dict[tuple[str, str], float | None]:
        """Current ``tat`` per (limit, key). With *lock*, the rows are locked (PostgreSQL) so
        workers take permits in turn; without, it is a plain read to see if any permit is free."""
        wanted = sorted(set(pairs))  # a fixed order: two workers never lock in opposite orders
        if not wanted:
            return {}
        locking = lock and not self.db.is_sqlite
        source, params = _pairs(self.db, [(n, k, now) for n, k in wanted])
        if locking:
            self.db.execute(q(_STATE_INIT.format(pairs=source)), params)
        suffix = "ORDER BY s.name, s.key FOR UPDATE OF s" if locking else ""
        stmt = q(_STATE_READ.format(pairs=source, suffix=suffix))
        found = {(r.name, r.key): r.tat for r in self.db.execute(stmt, params)}
        return {pair: found.get(pair) for pair in wanted}

    def save_limit_states(self, states: dict[tuple[str, str], float]) -> None:
        if not states:
            return
        source, params = _pairs(self.db, [(n, k, t) for (n, k), t in states.items()])
        self.db.execute(q(_STATE_SAVE.format(pairs=source)), params)

    def defer(self, rows: Sequence[tuple[int, float, str]]) -> None:
        """Move only ``due_at`` (and say why): the job cannot get a permit before *until*."""
        self.db.executemany(
            _DEFER, [{"id": i, "until": until, "why": why} for i, until, why in rows]
        )

    def wait_for_deps(self, ids: Sequence[int]) -> None:
        """Park jobs whose dependencies have no valid result; a dependency's commit wakes them."""
        self.db.executemany(_WAIT, [{"id": i} for i in ids])

    def next_deferred(self, tasks: Sequence[str]) -> float | None:
        """The earliest due time of jobs of *tasks* deferred by a rate limit."""
        clause, params = _in(self.db, "tasks", tasks)
        stmt = q(
            "SELECT min(due_at) FROM jobs WHERE waiting IS NOT NULL AND waiting LIKE 'limit:%'"
            f" AND task {clause}"
        )
        value = self.db.execute(stmt, params).scalar()
        return None if value is None else float(value)
