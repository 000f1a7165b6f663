"""The storage interface: query-shaped verbs over one database connection.

Domain rules (what a transition means, how effects apply) live in ``trawl.engine``; this
module only knows how to say them in SQL on SQLite and PostgreSQL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from trawl.model.errors import UnknownTask
from trawl.model.limits import Limit
from trawl.model.records import (
    ClaimedJob,
    FailureRecord,
    ItemView,
    JournalEntry,
    NewItem,
    TaskCounts,
    TaskInfo,
)
from trawl.model.states import Journal
from trawl.store import (
    admin,
    bulk,
    codec,
    gauges,
    migrate,
    planner_stats,
    reads,
    scheduling,
    staging,
    transitions,
    vacuum,
)
from trawl.store import claim as claim_sql
from trawl.store.activity import Activity
from trawl.store.connection import CACHE_MIB, Database
from trawl.store.connection import SMALL_CACHE_MIB as SMALL_CACHE_MIB
from trawl.store.consumers import Consumers
from trawl.store.crawls import CrawlTables
from trawl.store.gates import Gates
from trawl.store.handoffs import ExecutorTask, FeederRow, Handoffs
from trawl.store.items import Items
from trawl.store.listings import Listings
from trawl.store.pipelines import Pipelines
from trawl.store.pools import Pools
from trawl.store.queues import Queues
from trawl.store.results import Results
from trawl.store.sql import NEW_JOBS, NOTIFY, RESELECT, q
from trawl.store.tokens import Tokens

Clock = Callable[[], float]
_DB_TIME = q("SELECT extract(epoch FROM clock_timestamp())")

_TAGS_OF_SQLITE = q(
    "SELECT item_id, name, value FROM tags WHERE item_id IN (SELECT value FROM json_each(:ids))"
)
_TAGS_OF_POSTGRES = q(
    "SELECT item_id, name, value FROM tags WHERE item_id = ANY(CAST(:ids AS text[]))"
)
_FAILURE = q(
    "INSERT INTO failures (job_id, item_id, task, attempt, error_type, message, traceback,"
    " occurred_at, handled, allowed) VALUES (:job_id, :item_id, :task, :attempt, :error_type,"
    " :message, :traceback, :occurred_at, false, :allowed)"
)
_TASK_ROW = q("SELECT version, ttl, timeout, retries, niceness FROM tasks WHERE name = :name")
_TASK_TAGS = q("SELECT tag FROM task_tags WHERE task = :name ORDER BY tag")
_UPSERT_TASK = q(
    "INSERT INTO tasks (name, version, ttl, timeout, retries, niceness, registered_at,"
    " pipeline_tag)"
    " VALUES (:name, :version, :ttl, :timeout, :retries, :niceness, :now, :pipeline_tag)"
    " ON CONFLICT (name) DO UPDATE SET version = excluded.version, ttl = excluded.ttl,"
    " timeout = excluded.timeout, retries = excluded.retries, niceness = excluded.niceness,"
    " registered_at = excluded.registered_at, pipeline_tag = excluded.pipeline_tag"
)
_CLEAR_TASK_TAGS = q("DELETE FROM task_tags WHERE task = :name")
_ADD_TASK_TAG = q("INSERT INTO task_tags (task, tag) VALUES (:name, :tag)")
# Jobs for every item already carrying a tag the task selects.
_JOBS_FOR_TASK = q(
    f"""{NEW_JOBS}
    SELECT DISTINCT t.item_id, tt.task, 'queued', :now, true, 0, :niceness, false, true, 0,
           i.last_update
    FROM task_tags tt JOIN tags t ON t.name = tt.tag JOIN items i ON i.id = t.item_id
    WHERE tt.task = :name
    {RESELECT}"""
)
_DESELECT_FOR_TASK = q(
    """
    UPDATE jobs SET selected = false, due_at = NULL, ready = false
    WHERE task = :name AND selected AND status <> 'running'
      AND NOT EXISTS (SELECT 1 FROM tags t JOIN task_tags tt ON tt.tag = t.name
                      WHERE t.item_id = jobs.item_id AND tt.task = jobs.task)
    """
)
# One set-based statement: results another version made are due now.
_VERSION_BUMP = q(
    "UPDATE jobs SET due_at = :now, ready = true"
    " WHERE task = :name AND selected AND status <> 'running'"
    " AND result_version IS NOT NULL AND result_version <> :version"
)


def _marks(count: int) -> str:
    return ", ".join(f":p{n}" for n in range(count))


def _numbered(values: Sequence[Any]) -> dict[str, Any]:
    return {f"p{n}": value for n, value in enumerate(values)}


class Store:
    """Everything trawl stores, behind a small set of query-shaped verbs.

    The verbs on Store are whole operations (each its own transaction unless the caller
    holds one). Its parts hold the verbs of one concern, run inside the caller's
    transaction (:meth:`write`, :meth:`read`): ``items``, ``results``, ``gates`` (the
    claim's), ``pools`` (the visit policies'), ``handoffs`` (external executors'),
    ``queues`` (the orchestrator's), ``crawls`` (the crawl tables), ``listings``
    (cursor-paged reads for the API), ``tokens`` (API tokens), ``consumers`` (named journal
    readers), ``pipelines`` (remote workers), ``activity`` (what is going on now, for the
    dashboard). Nothing outside ``trawl.store`` touches the connection (``db``) or
    SQLAlchemy.
    """

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = time.time,
        cache_mib: int = CACHE_MIB,
        temp_in_memory: bool = False,
    ) -> None:
        self.db = Database(url, cache_mib=cache_mib, temp_in_memory=temp_in_memory)
        self.items = Items(self.db)
        self.results = Results(self.db)
        self.gates = Gates(self.db)
        self.pools = Pools(self.db)
        self.handoffs = Handoffs(self.db)
        self.queues = Queues(self.db)
        self.crawls = CrawlTables(self.db)
        self.listings = Listings(self.db)
        self.tokens = Tokens(self.db)
        self.consumers = Consumers(self.db)
        self.pipelines = Pipelines(self.db)
        self.activity = Activity(self.db)
        self.clock = clock

    @property
    def url(self) -> str:
        return self.db.url

    @property
    def is_sqlite(self) -> bool:
        return self.db.is_sqlite

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions and the schema --------------------------------------------------------

    def write(self, *, soft: bool = False) -> AbstractContextManager[object]:
        """A write transaction (SQLite: the write lock, taken up front); nested, a savepoint.
        *soft*: its writes may be lost if the database server crashes (never if this
        process does), for state that rebuilds or expires by itself; on PostgreSQL its
        COMMIT then does not wait for the WAL flush."""
        return self.db.write(soft=soft)

    def read(self) -> AbstractContextManager[object]:
        """A read transaction: one snapshot for the verbs inside."""
        return self.db.read()

    def unit(self) -> AbstractContextManager[object]:
        """One transaction that the :meth:`write` blocks inside join rather than nest in
        (a worker commits finished attempts and claims the next batch in one COMMIT)."""
        return self.db.unit()

    def savepoint(self) -> AbstractContextManager[object]:
        """Inside a write: a part that can fail and be rolled back alone."""
        return self.db.savepoint()

    def on_commit(self, callback: Callable[[list[dict[str, Any]]], None] | None) -> None:
        """Call *callback* after each COMMIT with the journal rows it wrote."""
        self.db.on_commit = callback

    def ensure_schema(self, *, auto: bool) -> None:
        """Upgrade the schema if *auto* (the embedded SQLite default) and it is behind; else
        a behind schema is a SchemaOutdated error that says to run ``trawl db upgrade``."""
        migrate.ensure(self.db, auto=auto)

    def schema_revision(self) -> str | None:
        """The schema's migration revision (``None``: no trawl schema yet)."""
        return migrate.current(self.db)

    def upgrade_schema(self) -> tuple[str | None, str]:
        """Apply the migrations this trawl has, in one transaction; (before, after)."""
        return migrate.upgrade(self.db)

    def stale_statistics(self) -> list[str]:
        """PostgreSQL: the tables that grew since their statistics were taken, so worth an
        :meth:`analyze` (planner_stats.py says why; one quick read). SQLite: none."""
        with self.db.translated():
            return planner_stats.stale(self.db)

    def analyze(self, tables: list[str]) -> None:
        """``ANALYZE`` these trawl tables (PostgreSQL; SQLite: nothing)."""
        with self.db.translated():
            planner_stats.analyze(self.db, tables)

    def crowded_tables(self) -> list[str]:
        """PostgreSQL: the churning tables (crawl slots and hosts) full enough of dead rows
        to be worth a :meth:`vacuum` (vacuum.py says why; one quick read). SQLite: none."""
        with self.db.translated():
            return vacuum.crowded(self.db)

    def vacuum(self, tables: list[str]) -> None:
        """``VACUUM`` these churning tables, outside any transaction (PostgreSQL; SQLite:
        nothing)."""
        with self.db.translated():
            vacuum.vacuum(self.db, tables)

    # -- tasks ----------------------------------------------------------------------------

    def register_tasks(self, infos: Iterable[TaskInfo]) -> dict[str, int]:
        """Record the app's tasks, create their missing jobs; returns jobs re-queued by a
        version change, per task."""
        requeued: dict[str, int] = {}
        with self.db.temp_on_disk(), self.db.write():
            now = self.clock()
            for info in infos:
                count = self._register(info, now)
                if count:
                    requeued[info.name] = count
            self._notify()
        return requeued

    def _register(self, info: TaskInfo, now: float) -> int:
        old = self.db.execute(_TASK_ROW, {"name": info.name}).first()
        old_tags = tuple(self.db.execute(_TASK_TAGS, {"name": info.name}).scalars())
        self.db.execute(
            _UPSERT_TASK,
            {
                "name": info.name,
                "version": info.version,
                "ttl": info.ttl,
                "timeout": info.timeout,
                "retries": info.retries,
                "niceness": info.niceness,
                "now": now,
                "pipeline_tag": info.pipeline_tag,
            },
        )
        tags = tuple(sorted(set(info.tags)))
        if tags != old_tags:
            self.db.execute(_CLEAR_TASK_TAGS, {"name": info.name})
            self.db.executemany(_ADD_TASK_TAG, [{"name": info.name, "tag": t} for t in tags])
            params = {"name": info.name, "now": now, "niceness": info.niceness}
            self.db.execute(_JOBS_FOR_TASK, params)
            self.db.execute(_DESELECT_FOR_TASK, {"name": info.name})
            self.items.journal(Journal.TASK_REGISTERED, now, None, info.name, {"tags": tags})
        scheduling.register_options(self.db, info)
        if old is None or old.version == info.version:
            return 0
        params = {"name": info.name, "version": info.version, "now": now}
        count = self.db.execute(_VERSION_BUMP, params).rowcount
        detail = {"from": old.version, "to": info.version, "requeued": count}
        self.items.journal(Journal.TASK_VERSION, now, None, info.name, detail)
        return int(count)

    def register_limits(self, limits: Sequence[Limit]) -> None:
        """Record the app's rate limits so `trawl limits` can show them."""
        with self.db.write():
            scheduling.register_limits(self.db, limits, self.clock())

    def limits(self) -> list[scheduling.LimitRow]:
        with self.db.read():
            return scheduling.limit_rows(self.db, self.clock())

    def pause_task(self, name: str, *, paused: bool = True, reason: str | None = None) -> bool:
        """Stop (or resume) claims of a task on every worker; ``False`` if already so."""
        with self.db.write():
            self.require_task(name)
            why = reason or ("paused by hand" if paused else None)
            return scheduling.set_paused(self.items, name, paused, why, self.clock())

    def task_names(self) -> list[str]:
        return list(self.db.execute(q("SELECT name FROM tasks ORDER BY name")).scalars())

    def require_task(self, name: str) -> None:
        if self.db.execute(_TASK_ROW, {"name": name}).first() is None:
            known = ", ".join(self.task_names()) or "none yet: run a worker to register them"
            raise UnknownTask(f"unknown task {name!r} (known tasks: {known})")

    # -- items ----------------------------------------------------------------------------

    def add_items(self, new: Sequence[NewItem], *, created_by: str | None = None) -> list[str]:
        """Create the items whose ids are free, in one transaction; returns the created ids.

        An id already in use (as an item or an alias) is left as it is."""
        with self.db.write():
            created = bulk.add_items(self.db, new, self.clock(), created_by)
            if created:
                self._notify()
        return created

    def stage_items(
        self, *, created_by: str | None = None, writers: int = 1
    ) -> AbstractContextManager[staging.ItemStages]:
        """For a file of items: stage them as they are checked (``add``), then, once all are
        known good, write them a batch per transaction (``write``), with the rules of
        :meth:`add_items`. Nothing is written until ``write``; leaving the block unstages.

        *writers* (PostgreSQL): how many connections write batches at once, this store's
        and ``writers - 1`` more; the items are spread over them by id."""
        return staging.staged(self.db, self.clock, created_by, writers=writers)

    # -- the job lifecycle ----------------------------------------------------------------

    def promote(self, now: float) -> None:
        """Move jobs whose time has come into the claim index."""
        stmt = claim_sql.PROMOTE_SQLITE if self.is_sqlite else claim_sql.PROMOTE_POSTGRES
        self.db.send(stmt, {"now": now})

    def clock_offset(self, local: Clock = time.time) -> float:
        """Seconds the database's clock is ahead of *local* (0 on SQLite: same machine)."""
        if self.is_sqlite:
            return 0.0
        with self.db.read():
            before = local()
            remote = float(self.db.execute(_DB_TIME).scalar() or 0.0)
            after = local()
        return remote - (before + after) / 2

    def lapsed(self, tasks: Sequence[str], limit: int) -> list[tuple[ClaimedJob, str | None]]:
        """Running jobs of *tasks* whose lease lapsed without a commit, and their holders."""
        with self.db.read():
            return self.queues.lapsed(tasks, self.clock(), limit)

    def claim_due(
        self, tasks: dict[str, float], limit: int, owner: str, now: float, *, later: bool = False
    ) -> list[Any]:
        """The one-statement claim (inside the caller's transaction); rows for claimed().
        *later*: the rows are wanted only once the transaction has committed, so on
        PostgreSQL the statement waits to go out with the COMMIT (``Database.fetch_later``)
        and the list returned is filled then."""
        names, timeouts = list(tasks), list(tasks.values())
        base = {"now": now, "limit": limit, "owner": owner}
        if self.is_sqlite:
            stmt = claim_sql.claim_sqlite(len(names))
            params = base | claim_sql.claim_sqlite_params(names, timeouts)
        else:
            stmt = claim_sql.CLAIM_POSTGRES
            params = base | {"tasks": names, "timeouts": timeouts}
        return self.db.fetch_later(stmt, params) if later else self.db.fetch(stmt, params)

    def claim_pages(
        self, task: str, crawls: Sequence[int], timeout: float, limit: int, owner: str
    ) -> list[ClaimedJob]:
        """Lease up to *limit* due jobs of *task* (the fetch task) whose pages belong to
        *crawls*: a remote pipeline's share of the crawls routed to it."""
        if not crawls or limit <= 0:
            return []
        ids: Any = codec.dumps(list(crawls)) if self.is_sqlite else list(crawls)
        stmt = claim_sql.CLAIM_PAGES_SQLITE if self.is_sqlite else claim_sql.CLAIM_PAGES_POSTGRES
        with self.db.write():
            now = self.clock()
            self.promote(now)
            params = {"task": task, "crawls": ids, "timeout": timeout, "limit": limit}
            return self.claimed(self.db.fetch(stmt, params | {"owner": owner, "now": now}))

    def lease(self, chosen: Sequence[tuple[int, float]], owner: str, now: float) -> list[Any]:
        """Lease jobs a gated claim chose: (job id, lease seconds) pairs."""
        if not chosen:
            return []
        params = transitions.batch_params(self.is_sqlite, ("id", "timeout"), chosen)
        stmt = claim_sql.LEASE_SQLITE if self.is_sqlite else claim_sql.LEASE_POSTGRES
        return self.db.fetch(stmt, params | {"now": now, "owner": owner})

    def held_by(self, tasks: Sequence[str], owner: str) -> list[ClaimedJob]:
        """The running jobs of *tasks* leased to *owner*, as a claim returns them (inside
        the caller's transaction)."""
        if not tasks:
            return []
        stmt = claim_sql.held(self.is_sqlite, len(tasks))
        params = {"owner": owner} | {f"task{i}": task for i, task in enumerate(tasks)}
        return self.claimed(self.db.fetch(stmt, params))

    def peek_due(self, tasks: dict[str, Sequence[str]], limit: int) -> list[ClaimedJob]:
        """The jobs a claim would take next, without leasing them (for dry runs). *tasks*
        maps names to their tags: a task no worker registered yet has no jobs, so its
        would-be jobs are the items carrying those tags."""
        with self.db.read():
            known = set(self.task_names())
            rows = self._due_rows([t for t in tasks if t in known], limit)
            for name, tags in tasks.items():
                if name not in known and len(rows) < limit:
                    rows += self._tagged_rows(name, tags, limit - len(rows))
            return self.claimed(rows)

    def _due_rows(self, tasks: Sequence[str], limit: int) -> list[Any]:
        if not tasks:
            return []
        stmt = q(
            "SELECT j.id, j.item_id, j.task, j.attempt + 1, j.fail_count, i.data,"
            " j.result_hash, j.revisit_offset, j.not_found"
            " FROM jobs j JOIN items i ON i.id = j.item_id"
            f" WHERE j.due_at <= :now AND j.task IN ({_marks(len(tasks))})"
            " ORDER BY j.niceness, j.ever_run, j.due_at LIMIT :limit"
        )
        params = {"now": self.clock(), "limit": limit} | _numbered(tasks)
        return list(self.db.execute(stmt, params).all())

    def _tagged_rows(self, task: str, tags: Sequence[str], limit: int) -> list[Any]:
        if not tags:
            return []
        stmt = q(
            "SELECT DISTINCT 0, i.id, :task, 1, 0, i.data, NULL, 0, 0 FROM items i"
            f" JOIN tags t ON t.item_id = i.id WHERE t.name IN ({_marks(len(tags))})"
            " ORDER BY i.id LIMIT :limit"
        )
        params = {"task": task, "limit": limit} | _numbered(tags)
        return list(self.db.execute(stmt, params).all())

    def claimed(self, rows: Sequence[Any]) -> list[ClaimedJob]:
        """Records for claimed rows; claims return each item's tags as JSON, other reads
        (dry runs) have them looked up."""
        if rows and len(rows[0]) > 9:
            tags = {row[1]: codec.loads(row[9]) or {} for row in rows}
        else:
            tags = self._tags_of([row[1] for row in rows])
        return [
            ClaimedJob(
                job_id=row[0],
                item_id=row[1],
                task=row[2],
                attempt=row[3],
                fail_count=row[4],
                data=codec.loads(row[5]),
                tags=tags.get(row[1], {}),
                result_hash=row[6],
                revisit_offset=row[7],
                not_found=row[8],
            )
            for row in rows
        ]

    def _tags_of(self, item_ids: Sequence[str]) -> dict[str, dict[str, str | None]]:
        result: dict[str, dict[str, str | None]] = {}
        if not item_ids:
            return result
        unique = list(dict.fromkeys(item_ids))
        ids: Any = codec.dumps(unique) if self.is_sqlite else unique
        stmt = _TAGS_OF_SQLITE if self.is_sqlite else _TAGS_OF_POSTGRES
        for item_id, name, value in self.db.execute(stmt, {"ids": ids}):
            result.setdefault(item_id, {})[name] = value
        return result

    def renew(self, leases: Sequence[tuple[int, int, float]]) -> set[int]:
        """Extend leases (job id, attempt, seconds); returns the job ids still held."""
        if not leases:
            return set()
        params = transitions.renew_params(self.is_sqlite, leases)
        stmt = transitions.statement(
            self.is_sqlite, transitions.RENEW_SQLITE, transitions.RENEW_POSTGRES
        )
        with self.db.write():
            params["now"] = self.clock()
            return {row[0] for row in self.db.fetch(stmt, params)}

    def apply_outcomes(self, rows: Sequence[Sequence[Any]], now: float) -> set[tuple[int, int]]:
        """Fenced transitions for a batch (inside the caller's transaction): the (job id,
        attempt) pairs that were still held and are now committed."""
        if not rows:
            return set()
        params = transitions.outcome_params(self.is_sqlite, rows)
        params["now"] = now
        stmt = transitions.statement(
            self.is_sqlite, transitions.COMMIT_SQLITE, transitions.COMMIT_POSTGRES
        )
        return {(job_id, attempt) for job_id, attempt in self.db.fetch(stmt, params)}

    def record_failures(self, rows: Sequence[dict[str, Any]]) -> None:
        self.db.send_many(_FAILURE, rows)

    def journal_many(self, rows: Sequence[dict[str, Any]]) -> None:
        self.db.journal(rows)

    def relist(self, item_id: str, now: float, last_update: float | None = None) -> None:
        """The item was listed again (inside a write): jobs disabled as not found are due."""
        scheduling.relist(self.db, item_id, now, last_update)

    def wake_dependents(self, done: Sequence[tuple[str, str, bool]], now: float) -> None:
        """Make due the jobs waiting on these (item, task, changed) results (inside a write)."""
        scheduling.wake_dependents(self.db, done, now)

    def notify(self) -> None:
        """Tell waiting workers that new work is due (PostgreSQL; SQLite workers poll)."""
        self._notify()

    def _notify(self) -> None:
        if not self.is_sqlite:
            self.db.send(NOTIFY)

    # -- reads ----------------------------------------------------------------------------

    def get_item(self, alias: str) -> ItemView | None:
        return reads.item(self.db, alias)

    def tagged(self, tag: str, *, after: str = "", limit: int = 1000) -> list[str]:
        """Ids of items tagged *tag*, in id order, after *after* (pass the last one seen)."""
        return reads.tagged(self.db, tag, after, limit)

    def get_metadata(self, task: str, alias: str) -> dict[str, Any] | None:
        return reads.metadata(self.db, task, alias)

    def status(self) -> list[TaskCounts]:
        return reads.status(self.db, self.clock())

    def executors(self) -> tuple[list[ExecutorTask], list[FeederRow]]:
        """Tasks external executors run, with their jobs in flight by hand-off state, and
        the feeders of their queues (with the broker's length when each last looked)."""
        with self.db.read():
            return self.handoffs.executor_tasks(), self.handoffs.feeders()

    def failures(
        self,
        *,
        task: str | None = None,
        item_id: str | None = None,
        include_handled: bool = False,
        limit: int = 100,
    ) -> list[FailureRecord]:
        return reads.failures(
            self.db, task=task, item_id=item_id, include_handled=include_handled, limit=limit
        )

    def journal(self, since: int = 0, limit: int = 1000) -> list[JournalEntry]:
        return reads.journal(self.db, since, limit)

    def gauges(self) -> gauges.Snapshot:
        """Whole-database counts for monitoring (jobs, due work, crawl pages, hosts, journal
        consumers): aggregate queries, so read them every few seconds, not per request."""
        return gauges.snapshot(self.db, self.clock(), self.consumers.list())

    def prune_journal(self, before: float, *, force: bool = False) -> int:
        """Delete journal entries written before *before* (seconds since the epoch); refused
        while a named consumer has not acknowledged them, unless *force*."""
        return self.consumers.prune(before, force=force)

    # -- operator commands ----------------------------------------------------------------

    def expire(self, task: str, *, tag: str | None = None, alias: str | None = None) -> int:
        with self.db.write():
            self.require_task(task)
            item_id = self.items.require(alias) if alias is not None else None
            count = admin.expire(self.items, task, self.clock(), tag=tag, item_id=item_id)
            self._notify()
        return count

    def retry_failures(
        self, *, task: str | None = None, alias: str | None = None, ids: list[int] | None = None
    ) -> int:
        with self.db.write():
            item_id = self._task_and_item(task, alias)
            count = admin.retry(self.items, self.clock(), task, item_id, ids)
            self._notify()
        return count

    def handle_failures(
        self, *, task: str | None = None, alias: str | None = None, ids: list[int] | None = None
    ) -> int:
        with self.db.write():
            item_id = self._task_and_item(task, alias)
            return admin.handle(self.items, self.clock(), task, item_id, ids)

    def _task_and_item(self, task: str | None, alias: str | None) -> str | None:
        if task is not None:
            self.require_task(task)
        return self.items.require(alias) if alias is not None else None


def analyze_apart(url: str, tables: list[str]) -> None:
    """``ANALYZE`` *tables* of the database at *url* on a connection opened for it. An
    ANALYZE of big tables takes seconds: on a connection with other work (a worker's
    leases, commits and claims; the API server's requests) that work would wait for it."""
    with Store(url, cache_mib=SMALL_CACHE_MIB) as store:
        store.analyze(tables)


def vacuum_apart(url: str, tables: list[str]) -> None:
    """``VACUUM`` *tables* of the database at *url* on a connection opened for it, as
    :func:`analyze_apart` analyzes: a worker's or the API server's other work does not wait
    for it (a host table of a big crawl holds a row for each of its hosts)."""
    with Store(url, cache_mib=SMALL_CACHE_MIB) as store:
        store.vacuum(tables)
