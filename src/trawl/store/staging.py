"""Adding a whole file of items: staged in a temporary table, then written set-based.

``trawl add --file`` checks every line before it writes anything, and a file may hold
millions of lines. Each good line goes, as it is checked, into a temporary table of this
connection (binary ``COPY`` on PostgreSQL, one ``executemany`` on SQLite): nothing another
connection sees, no write lock, and the file is parsed once. Once the whole file is known
good, :meth:`ItemStage.write` writes it a batch at a time, each batch one transaction of
set-based statements over the staged rows, so no row passes through Python again.

A batch keeps :func:`trawl.store.bulk.add_items`'s rules: of the same id twice the first
line wins (in a batch by ``DISTINCT ON``; in a later batch the id is taken by then), an id
in use as an item or an alias is left as it is and its jobs disabled as "not found" are
listed again, a tag named twice on one item keeps the first, each created item gets the
jobs its tags select and one ``item.created`` journal row, in the file's order.

On PostgreSQL the items can be spread over several connections (:class:`ItemStages`), each
staging and writing its share, the shares writing at the same time: a batch's cost is the
server's (inserts, index entries, a foreign-key check for each alias, tag and job), so each
writer keeps one server process busy. Lines go to a connection by their id, so every line
of an id is in one share, in the file's order, and the first still wins; the journal lists
each share's items in the file's order, the shares interleaved.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from sqlalchemy import exc

from trawl.model.errors import DatabaseUnavailable, TransientConflict, TrawlError
from trawl.model.itemjson import Tags
from trawl.model.records import NewItem
from trawl.store import codec
from trawl.store.connection import Database
from trawl.store.hotpath import Column
from trawl.store.sql import NEW_JOBS, NOTIFY, q

Clock = Callable[[], float]
log = logging.getLogger(__name__)

# A batch that lost a deadlock or waited past lock_timeout (a worker holding a job row it
# would list again) rolled back whole: it is tried again, this often, waiting longer each time.
RETRIES = 5
RETRY_WAIT = 0.2  # seconds, times the attempt

_ENCODED_MAX = 10_000  # sets of tags whose JSON a stage keeps
_STAGE = "trawl_stage"  # the staged lines: n is the good line's index, from 0
_MADE = "trawl_made"  # the items a batch created (emptied at each COMMIT)
_COLUMNS: tuple[Column, ...] = (
    ("n", "int8"),
    ("id", "text"),
    ("data", "text"),
    ("niceness", "int4"),
    ("tags", "text"),  # JSON [[name, value], ...], in the item's order
    ("detail", "text"),  # the item.created journal row's detail
)
_DROP = (f"DROP TABLE IF EXISTS temp.{_MADE}", f"DROP TABLE IF EXISTS temp.{_STAGE}")
_CREATE_SQLITE = (
    f"CREATE TEMP TABLE {_STAGE} (n INTEGER PRIMARY KEY, id TEXT NOT NULL, data TEXT NOT NULL,"
    " niceness INTEGER, tags TEXT NOT NULL, detail TEXT NOT NULL)",
    f"CREATE TEMP TABLE {_MADE} (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,"
    " detail TEXT NOT NULL)",
)
# Ids compare as in trawl's tables (schema.Text): byte by byte, whatever the database's
# collation, so a batch's DISTINCT ON and ORDER BY sort the way the indexes take them.
_CREATE_POSTGRES = (
    f'CREATE TEMP TABLE {_STAGE} (n bigint PRIMARY KEY, id text COLLATE "C" NOT NULL,'
    " data text NOT NULL, niceness integer, tags text NOT NULL, detail text NOT NULL)",
    f'CREATE TEMP TABLE {_MADE} (n bigint, id text COLLATE "C", detail text) ON COMMIT DELETE ROWS',
)
_DROP_POSTGRES = (f"DROP TABLE IF EXISTS pg_temp.{_MADE}", f"DROP TABLE IF EXISTS pg_temp.{_STAGE}")

_JOURNAL = q(
    "INSERT INTO journal (at, kind, item_id, task, detail)"
    f" SELECT :now, 'item.created', id, NULL, detail FROM {_MADE} ORDER BY n"
)
_RELIST = """
    UPDATE jobs SET due_at = :now, ready = true, not_found = 0
    WHERE selected AND not_found > 0 AND due_at IS NULL AND status = 'failed'
      AND item_id IN ({existing})
"""

# -- SQLite: the writer holds the lock, so ids found free stay free until COMMIT ------------
_IN_BATCH = "s.n >= :first AND s.n < :end"
_MADE_SQLITE = q(
    f"""
    INSERT INTO {_MADE} (n, id, detail)
    SELECT s.n, s.id, s.detail FROM {_STAGE} s
    WHERE {_IN_BATCH}
      AND NOT EXISTS (SELECT 1 FROM items WHERE id = s.id)
      AND NOT EXISTS (SELECT 1 FROM aliases WHERE alias = s.id)
    ORDER BY s.n
    ON CONFLICT (id) DO NOTHING
"""
)
_COUNT_SQLITE = q(f"SELECT count(*) FROM {_MADE}")
_ITEMS_SQLITE = q(
    "INSERT INTO items (id, data, created_by, created_at, updated_at)"
    f" SELECT m.id, s.data, :by, :now, :now FROM {_MADE} m JOIN {_STAGE} s USING (n)"
    " ORDER BY m.id"
)
_ALIASES_SQLITE = q(f"INSERT INTO aliases (alias, item_id) SELECT id, id FROM {_MADE} ORDER BY id")
_TAGS_SQLITE = q(
    f"""
    INSERT INTO tags (item_id, name, value)
    SELECT m.id, t.value ->> 0, t.value ->> 1
    FROM {_MADE} m JOIN {_STAGE} s USING (n), json_each(s.tags) t
    WHERE true ORDER BY m.id, t.key
    ON CONFLICT DO NOTHING
"""
)
# CROSS JOIN fixes the join order: from the batch's items to the tasks their tags select
# (the other way round, SQLite reads every item carrying the tag, batch after batch).
_JOBS_SQLITE = q(
    f"""{NEW_JOBS}
    SELECT DISTINCT m.id, tt.task, 'queued', :now, true, 0,
           COALESCE(s.niceness, k.niceness), false, true, 0, NULL
    FROM {_MADE} m CROSS JOIN {_STAGE} s ON s.n = m.n CROSS JOIN json_each(s.tags) t
    CROSS JOIN task_tags tt ON tt.tag = t.value ->> 0 JOIN tasks k ON k.name = tt.task
    ORDER BY m.id
"""
)
_RELIST_SQLITE = q(
    _RELIST.format(
        existing=f"SELECT a.item_id FROM {_STAGE} s JOIN aliases a ON a.alias = s.id"
        f" WHERE {_IN_BATCH} AND s.id NOT IN (SELECT id FROM {_MADE})"
    )
)
# The last batch's rows stay until the next one starts: its journal insert reads them
# just before COMMIT (PostgreSQL empties the table at each COMMIT itself).
_CLEAR_SQLITE = q(f"DELETE FROM {_MADE}")

# -- PostgreSQL: one statement a batch; ids may be taken concurrently, so ON CONFLICT -------
_RELIST_POSTGRES = _RELIST.format(
    existing="SELECT a.item_id FROM src JOIN aliases a ON a.alias = src.id"
    " WHERE src.id NOT IN (SELECT id FROM alias)"
)
# An id that is already another item's alias gets an items row but no alias row: the
# answer's second column lists those, and they are dropped again (_ORPHANS).
_BATCH_POSTGRES = q(
    f"""
    WITH src AS (
        SELECT DISTINCT ON (id) n, id, data, niceness, tags, detail FROM {_STAGE} s
        WHERE {_IN_BATCH} ORDER BY id, n
    ), item AS (
        INSERT INTO items (id, data, created_by, created_at, updated_at)
        SELECT id, data, :by, :now, :now FROM src ORDER BY id
        ON CONFLICT DO NOTHING RETURNING id
    ), alias AS (
        INSERT INTO aliases (alias, item_id) SELECT id, id FROM item ORDER BY id
        ON CONFLICT DO NOTHING RETURNING alias AS id
    ), fresh AS (
        SELECT src.* FROM src JOIN alias USING (id)
    ), pair AS (
        SELECT f.id, f.niceness, t.pair ->> 0 AS name, t.pair ->> 1 AS value, t.k
        FROM fresh f, json_array_elements(CAST(f.tags AS json)) WITH ORDINALITY AS t(pair, k)
    ), tag AS (
        INSERT INTO tags (item_id, name, value)
        SELECT DISTINCT ON (id, name) id, name, value FROM pair ORDER BY id, name, k
    ), job AS (
        {NEW_JOBS}
        SELECT DISTINCT ON (p.id, tt.task) p.id, tt.task, 'queued', :now, true, 0,
               COALESCE(p.niceness, k.niceness), false, true, 0, CAST(NULL AS REAL)
        FROM pair p JOIN task_tags tt ON tt.tag = p.name JOIN tasks k ON k.name = tt.task
        ORDER BY p.id, tt.task
    ), relist AS (
        {_RELIST_POSTGRES}
    ), made AS (
        INSERT INTO {_MADE} (n, id, detail) SELECT n, id, detail FROM fresh
    )
    SELECT (SELECT count(*) FROM alias), ARRAY(SELECT id FROM item EXCEPT SELECT id FROM alias)
"""
)
_ORPHANS = q("DELETE FROM items WHERE id = ANY(CAST(:ids AS text[]))")
# The planner's guess for a JSON array's elements (100 a row) prices a batch high enough to
# compile it: about half a second a batch of 5,000, for a statement that runs in a fifth.
_NO_JIT = q("SET LOCAL jit = off")


class ItemStage:
    """One connection's staged items, written batch by batch."""

    def __init__(self, db: Database, clock: Clock, created_by: str | None) -> None:
        self.db = db
        self.clock = clock
        self.created_by = created_by
        self.count = 0  # items staged
        self._encoded: dict[Tags, tuple[str, str]] = {}

    def open(self) -> None:
        self._run(_DROP if self.db.is_sqlite else _DROP_POSTGRES)
        self._run(_CREATE_SQLITE if self.db.is_sqlite else _CREATE_POSTGRES)

    def close(self) -> None:
        """Drop the tables; a connection that cannot is dropped, and its tables with it."""
        try:
            self._run(_DROP if self.db.is_sqlite else _DROP_POSTGRES)
        except (exc.DBAPIError, TrawlError):
            self.db.reset()

    def _run(self, statements: Iterable[str]) -> None:
        for statement in statements:
            self.db.execute(q(statement))

    def add(self, items: Iterable[NewItem]) -> None:
        """Stage *items*, consumed as they come."""
        with self.db.scratch():
            self.db.copy(_STAGE, _COLUMNS, map(self.row, items))

    def row(self, item: NewItem) -> tuple[Any, ...]:
        """*item* as a staged row, the next in this stage's order."""
        encoded = self._encoded.get(item.tags)
        if encoded is None:
            encoded = self._encode(item.tags)
        n, self.count = self.count, self.count + 1
        return (n, item.id, codec.dumps(item.data), item.niceness, *encoded)

    def _encode(self, tags: Tags) -> tuple[str, str]:
        """*tags* as staged: their JSON and the journal row's detail. A file names few sets
        of tags, so each is encoded once (the cache is bounded for one that names many)."""
        if len(self._encoded) >= _ENCODED_MAX:
            self._encoded.clear()
        detail = codec.dumps({"created_by": self.created_by, "tags": dict(tags)})
        encoded = self._encoded[tags] = (codec.dumps(tags), detail)
        return encoded

    def ranges(self, batch_size: int) -> Iterator[tuple[int, int]]:
        for first in range(0, self.count, batch_size):
            yield first, min(first + batch_size, self.count)

    def batch(self, first: int, end: int) -> int:
        """Write staged rows *first* to *end* (excluded) in one transaction, tried again
        when it lost a deadlock or waited too long for a lock; how many items it created."""
        for attempt in range(1, RETRIES):
            try:
                return self._batch(first, end)
            except TransientConflict as error:
                log.info("adding items again after a conflict (%s): %s", attempt, error)
                time.sleep(RETRY_WAIT * attempt)
        return self._batch(first, end)  # the last try: its conflict is raised

    def _batch(self, first: int, end: int) -> int:
        with self.db.write():
            now = self.clock()
            params = {"first": first, "end": end, "now": now, "by": self.created_by}
            made = self._made_sqlite(params) if self.db.is_sqlite else self._made_postgres(params)
            self.db.journal_from(_JOURNAL, {"now": now})
        return made

    def _made_sqlite(self, params: dict[str, Any]) -> int:
        self.db.send(_CLEAR_SQLITE)
        self.db.send(_MADE_SQLITE, params)
        made = int(self.db.fetch(_COUNT_SQLITE)[0][0])
        for statement in (_ITEMS_SQLITE, _ALIASES_SQLITE, _TAGS_SQLITE, _JOBS_SQLITE):
            self.db.send(statement, params)
        self.db.send(_RELIST_SQLITE, params)
        return made

    def _made_postgres(self, params: dict[str, Any]) -> int:
        self.db.send(_NO_JIT)
        [(made, orphans)] = self.db.fetch(_BATCH_POSTGRES, params)
        if orphans:
            self.db.send(_ORPHANS, {"ids": orphans})
        if made:
            self.db.send(NOTIFY)  # workers waiting for work wake at COMMIT
        return int(made)


class Written(NamedTuple):
    """One batch written: how many staged items it covered, and how many it created."""

    items: int
    made: int


class ItemStages:
    """Items staged on one connection, or on PostgreSQL spread over several by id, so that
    as many transactions write them at once (the database server's work, not trawl's, is
    what a batch costs). Every line of one id goes to the same connection, so the first of
    them still wins."""

    def __init__(self, stages: Sequence[ItemStage]) -> None:
        self.stages = list(stages)

    @property
    def count(self) -> int:
        """Items staged."""
        return sum(stage.count for stage in self.stages)

    def add(self, items: Iterable[NewItem]) -> int:
        """Stage *items* (consumed as they come); returns how many are staged in all."""
        if len(self.stages) == 1:
            self.stages[0].add(items)
            return self.count
        with contextlib.ExitStack() as stack:
            sends = []
            for stage in self.stages:
                stack.enter_context(stage.db.scratch())
                sends.append(stack.enter_context(stage.db.copying(_STAGE, _COLUMNS)))
            stages, share = self.stages, len(self.stages)
            for item in items:
                k = hash(item.id) % share  # the same id, the same connection, this run
                sends[k](stages[k].row(item))
        return self.count

    def write(self, batch_size: int) -> Iterator[Written]:
        """Write the staged items, *batch_size* a transaction, each connection's in the
        order staged; yields each batch as it commits."""
        if len(self.stages) == 1:
            stage = self.stages[0]
            for first, end in stage.ranges(batch_size):
                yield Written(end - first, stage.batch(first, end))
            return
        yield from _in_parallel(self.stages, batch_size)


def _in_parallel(stages: Sequence[ItemStage], batch_size: int) -> Iterator[Written]:
    """Each stage's batches in a thread of its own; the first error stops them all (after
    the batch each is writing) and is raised here."""
    done: queue.Queue[Written | BaseException | None] = queue.Queue()
    stop = threading.Event()

    def run(stage: ItemStage) -> None:
        try:
            for first, end in stage.ranges(batch_size):
                if stop.is_set():
                    break
                done.put(Written(end - first, stage.batch(first, end)))
        except BaseException as error:  # handed to the caller's thread, raised there
            done.put(error)
        else:
            done.put(None)

    threads = [
        threading.Thread(target=run, args=(stage,), name=f"trawl-add-{n}", daemon=True)
        for n, stage in enumerate(stages)
    ]
    for thread in threads:
        thread.start()
    try:
        running = len(threads)
        while running:
            got = done.get()
            if got is None:
                running -= 1
            elif isinstance(got, BaseException):
                raise got
            else:
                yield got
    finally:
        stop.set()
        for thread in threads:
            thread.join()


@contextlib.contextmanager
def staged(
    db: Database, clock: Clock, created_by: str | None, *, writers: int = 1
) -> Iterator[ItemStages]:
    """:class:`ItemStages` on *db* and, with more than one writer (PostgreSQL), on as many
    connections more, opened and closed here; their tables exist for the block."""
    if writers < 1:
        raise TrawlError(f"writers must be at least 1, not {writers}")
    if writers > 1 and db.is_sqlite:
        raise TrawlError(
            f"{writers} writers asked, but SQLite has one writer: more need PostgreSQL"
        )
    extra: list[Database] = []
    opened: list[ItemStage] = []
    try:
        extra.extend(Database(db.url) for _ in range(writers - 1))
        for conn in (db, *extra):
            stage = ItemStage(conn, clock, created_by)
            try:
                stage.open()
            except exc.DBAPIError as error:
                raise _refused(error) from error
            except DatabaseUnavailable as error:
                if conn is db:
                    raise
                raise DatabaseUnavailable(
                    f"{error} (writer {len(opened) + 1} of {writers}: each writer needs a"
                    " connection of its own; --writers 1 uses only one)"
                ) from error
            opened.append(stage)
        yield ItemStages(opened)
    finally:
        for stage in opened:
            stage.close()
        for conn in extra:
            conn.close()


def _refused(error: exc.DBAPIError) -> Exception:
    if getattr(error.orig, "sqlstate", None) == "42501":  # insufficient_privilege
        return TrawlError(
            "adding a file needs a temporary table, and this database user may not create"
            " one: grant it TEMPORARY on the database"
        )
    return error
