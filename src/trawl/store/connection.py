"""One connection to the database, with explicit transactions and errors a user can act on.

Transactions are issued by hand (the connection runs in autocommit mode) so that SQLite can
take its write lock up front with ``BEGIN IMMEDIATE`` — one writer, queued by the busy
timeout — while reads stay plain deferred transactions. Hot-path statements go through
:meth:`Database.send` and :meth:`Database.fetch` (see hotpath.py): on PostgreSQL a write
transaction's BEGIN, the statements whose results nobody reads, and its COMMIT travel in
pipelines with the statements that do return something.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc

from trawl.model.errors import DatabaseUnavailable, DataRejected, TransientConflict, TrawlError
from trawl.store import codec, writer_lock
from trawl.store import url as urls
from trawl.store.hotpath import Column, HotPath, Statement

Params = Mapping[str, Any]

# The advisory lock that tells journal readers which seqs are settled ("trawl\0"). A
# transaction holds it shared from its journal insert to its end, so writers never wait for
# one another; a reader takes it exclusively for an instant (Database.journal_horizon): no
# transaction is then between taking seqs and ending, so every seq handed out so far is
# committed or rolled back for good, and a snapshot taken after that sees all that will ever
# exist up to there.
JOURNAL_LOCK = 0x7472_6177_6C00
_JOURNAL_COLUMNS = ("at", "kind", "item_id", "task", "detail")
JOURNAL_LOCK_SQL = f"SELECT pg_advisory_xact_lock_shared({JOURNAL_LOCK})"
_SETTLE_SQL = f"SELECT pg_advisory_xact_lock({JOURNAL_LOCK})"
# The last committed seq. Read while the lock is held exclusively, in a statement whose
# snapshot is taken after the lock (READ COMMITTED), it is the horizon: no seq can be handed
# out and committed meanwhile, and those handed out before are settled. (The sequence's own
# last_value would do too, but reading it needs SELECT on the sequence, which a role that
# only reads the journal, or one granted USAGE on sequences, does not have.)
_LAST_SEQ_SQL = "SELECT coalesce(max(seq), 0) FROM journal"
_LAST_SEQ_SQLITE = sa.text(_LAST_SEQ_SQL)
JOURNAL_NOTIFY_SQL = "SELECT pg_notify('trawl_journal', '')"
# SQLite's page cache per connection: a worker's claim and commit connection keeps the hot
# index pages in it, the OS's page cache the rest; a connection that only renews leases or
# counts progress needs little (SMALL_CACHE_MIB). A cache fills as the database passes its
# size, so it is what a crawl's memory grows by: at 64 MiB a crawl of 253,570 pages peaked
# at 191 MiB against 94 at 2,534 pages; at 16 MiB, 121 against 91, at the same speed.
CACHE_MIB = 16
SMALL_CACHE_MIB = 4
# Where SQLite keeps a statement journal: the copy of each page a statement changes, kept so
# that the statement alone can be undone (every multi-row insert of a transaction that
# writes more than one statement needs it). Past 64 KiB SQLite spills it to a new file in
# /var/tmp, created and deleted every transaction: a 20,000-page crawl's commits wrote
# 594 MB to 1,688 such files in 251,634 pwrite calls, more bytes than the WAL. In memory
# (temp_store=MEMORY) it costs a worker's connection at most what one statement of a batch
# changes; work that may change a whole table asks for the file (Database.temp_on_disk).
TEMP_IN_MEMORY = "PRAGMA temp_store=MEMORY"
TEMP_ON_DISK = "PRAGMA temp_store=FILE"
ASYNC_COMMIT_SQL = "SET LOCAL synchronous_commit TO OFF"  # a soft write's (Database.write)
# Bounded waits on PostgreSQL: a lock waited for past lock_timeout is a TransientConflict
# (retried), and a session that sits in a transaction doing nothing (a stopped or stuck
# process) is ended by the server, so its locks cannot block every other writer.
SESSION_OPTIONS = "-c lock_timeout=30s -c idle_in_transaction_session_timeout=60s"
JOURNAL_INSERT_SQLITE = sa.text(
    "INSERT INTO journal (at, kind, item_id, task, detail)"
    " SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4"
    " FROM json_each(:batch) ORDER BY key"
)
JOURNAL_INSERT_POSTGRES = sa.text(
    "INSERT INTO journal (at, kind, item_id, task, detail)"
    " SELECT CAST(e ->> 0 AS float8), e ->> 1, e ->> 2, e ->> 3, e ->> 4"
    " FROM jsonb_array_elements(CAST(:batch AS jsonb)) WITH ORDINALITY AS j(e, n) ORDER BY n"
)


class _Undo(Exception):
    """Rolls a savepoint back on purpose (journal_horizon)."""


class Database:
    """A single connection (callers use it from one thread at a time)."""

    def __init__(
        self, url: str, *, cache_mib: int = CACHE_MIB, temp_in_memory: bool = False
    ) -> None:
        """*cache_mib*: SQLite's page cache for this connection; *temp_in_memory*: its
        statement journals (and temporary tables) in memory, for a connection whose
        statements each write a batch, such as a worker's (:data:`TEMP_IN_MEMORY`).
        PostgreSQL ignores both."""
        self.url = url
        sa_url, self.dialect = urls.parse(url)
        self.engine = _engine(sa_url, self.dialect, cache_mib, temp_in_memory)
        self.temp_in_memory = temp_in_memory and self.is_sqlite
        self._driver = HotPath(self.engine.dialect)
        # Whatever reaches the connection through SQLAlchemy (here, in alembic, in a test
        # holding the connection) goes after the statements queued before it.
        event.listen(self.engine, "before_cursor_execute", self._before_sqlalchemy)
        # SQLite writers queue on a file lock (see writer_lock.py); PostgreSQL has row locks.
        self._writer = writer_lock.for_database(sa_url.database) if self.is_sqlite else None
        self.lock_timeout = _seconds(sa_url.query.get("lock_timeout"), writer_lock.DEFAULT_TIMEOUT)
        self._conn: sa.Connection | None = None
        self._depth = 0
        self._unit = False  # inside unit(): its direct sub-transactions join it
        self._savepoints = itertools.count()
        self._journal: list[dict[str, Any]] = []
        self._journal_sql: list[tuple[sa.TextClause, dict[str, Any]]] = []
        # Called after each COMMIT with the journal rows it wrote (plugins' item events).
        self.on_commit: Callable[[list[dict[str, Any]]], None] | None = None

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction of this connection is open (its COMMIT still to come)."""
        return self._depth > 0

    @property
    def conn(self) -> sa.Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self._connect()
        return self._conn

    @property
    def _raw(self) -> Any:
        """The DB-API connection under :attr:`conn`."""
        return self.conn.connection.dbapi_connection

    def _connect(self) -> sa.Connection:
        try:
            return self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        except exc.DBAPIError as error:
            raise unavailable(self.url, error) from error

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
        if self._writer is not None:
            self._writer.close()
        self.engine.dispose()

    @contextlib.contextmanager
    def write(self, *, soft: bool = False) -> Iterator[sa.Connection]:
        """A write transaction; nested calls become savepoints. *soft*: what it writes may
        be lost in a crash of the database server (never in one of this process), so on
        PostgreSQL its COMMIT does not wait for the WAL flush - nor does every transaction
        queued behind its row locks. For state that is rebuilt or expires by itself, such
        as a host's next request start."""
        if self._depth or self._writer is None:
            begin = "BEGIN IMMEDIATE" if self.is_sqlite else "BEGIN"
            with self._transaction(begin, soft=soft and not self.is_sqlite) as conn:
                yield conn
            return
        try:
            self._writer.acquire(self.lock_timeout)
        except TimeoutError:
            raise DatabaseUnavailable(
                f"{urls.display(self.url)}: waited {self.lock_timeout:g}s for SQLite's write"
                " lock: another process holds it (stopped, or stuck in a long transaction)"
            ) from None
        try:
            with self._transaction("BEGIN IMMEDIATE") as conn:
                yield conn
        finally:
            self._writer.release()

    @contextlib.contextmanager
    def temp_on_disk(self) -> Iterator[None]:
        """Run a block whose statements may each change a whole table (a task's jobs made or
        re-queued for every item) with SQLite's statement journals in files again, on a
        connection that keeps them in memory: such a journal holds a copy of every page the
        statement changes. Outside a transaction only: SQLite picks the place at BEGIN."""
        if not self.temp_in_memory or self._depth:
            yield
            return
        self._run(self.conn, TEMP_ON_DISK)
        try:
            yield
        finally:
            with contextlib.suppress(DatabaseUnavailable):  # a new connection sets its own
                self._run(self.conn, TEMP_IN_MEMORY)

    @contextlib.contextmanager
    def unit(self) -> Iterator[sa.Connection]:
        """One write transaction for several store operations (a worker's commit and its next
        claim): their own ``write()``/``read()`` join it instead of taking a savepoint each,
        so the whole unit is one BEGIN, one COMMIT and one WAL flush. It applies or fails as
        a whole; blocks nested deeper, and explicit ``savepoint()`` calls, keep their
        savepoints."""
        with self.write() as conn:
            self._unit = True
            try:
                yield conn
            finally:
                self._unit = False

    @contextlib.contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """A read transaction: one consistent snapshot for several statements."""
        with self._transaction("BEGIN") as conn:
            yield conn

    def scratch(self) -> contextlib.AbstractContextManager[sa.Connection]:
        """A transaction that writes only this connection's temporary tables: no write lock
        (on SQLite a deferred BEGIN: the temporary database is this connection's own), and
        nothing another connection can see."""
        return self._transaction("BEGIN")

    @contextlib.contextmanager
    def _transaction(self, begin: str, *, soft: bool = False) -> Iterator[sa.Connection]:
        conn = self.conn
        if self._unit and self._depth == 1:
            self._depth += 1  # what nests inside this part gets savepoints as usual
            try:
                yield conn
            finally:
                self._depth -= 1
            return
        if self._depth:
            with self.savepoint():
                yield conn
            return
        if self._driver.pipelined:
            self._driver.send(self._raw, begin)  # goes out with the first statement
            if soft:  # only ever asked on PostgreSQL, whose driver pipelines
                self._driver.send(self._raw, ASYNC_COMMIT_SQL)
        else:
            self._run(conn, begin)
        self._depth = 1
        try:
            yield conn
            # Inside the try: the journal insert is the transaction's last statement, and
            # a connection lost here must read as an outage like any other.
            rows = self._flush_journal()
        except exc.DBAPIError as error:
            self._abort(conn)
            raise translate(self.url, error) from error
        except BaseException:
            self._abort(conn)
            raise
        self._depth = 0
        self._run(conn, "COMMIT")
        if rows and self.on_commit is not None:
            self.on_commit(rows)

    def journal(self, rows: Sequence[Params]) -> None:
        """Queue journal rows; they are written just before this transaction commits."""
        self._journal.extend(dict(row) for row in rows)

    def journal_from(self, statement: sa.TextClause, params: Params) -> None:
        """Queue a statement that writes journal rows itself (``INSERT INTO journal ...
        SELECT``), for rows the database already holds: it runs where queued rows are
        written, under the same lock. ``on_commit`` hears only of queued rows."""
        self._journal_sql.append((statement, dict(params)))

    def _flush_journal(self) -> list[dict[str, Any]]:
        rows, self._journal = self._journal, []
        statements, self._journal_sql = self._journal_sql, []
        if not rows and not statements:
            return rows
        if not self.is_sqlite:
            # Seqs may become visible out of order (two writers commit in the other order
            # than they took them): the shared lock, held from here to the end of the
            # transaction, is what lets a reader find the seqs that are settled
            # (journal_horizon). SQLite's one writer commits in seq order.
            self.send(JOURNAL_LOCK_SQL)
        for statement, params in statements:
            self.send(statement, params)
        if rows:
            # One JSON array for the whole batch: msgspec encodes it far faster than the
            # driver dumps five arrays element by element.
            batch = codec.dumps([[row[c] for c in _JOURNAL_COLUMNS] for row in rows])
            insert = JOURNAL_INSERT_SQLITE if self.is_sqlite else JOURNAL_INSERT_POSTGRES
            self.send(insert, {"batch": batch})
        if not self.is_sqlite:  # followers of the journal (the API's stream) wake at COMMIT
            self.send(JOURNAL_NOTIFY_SQL)
        return rows

    def journal_horizon(self) -> int:
        """The highest journal seq up to which the journal is settled: no transaction that
        could still commit holds a seq at or below it, so a reader following the journal
        reads up to here and never passes an entry that commits later. On SQLite, whose one
        writer commits seqs in order, the last committed entry's seq.

        It waits for the transactions that are writing journal rows as it asks (their
        COMMIT: about a WAL flush), and those that begin meanwhile wait for it, for the
        instant it holds the lock. Inside a transaction the lock is taken in a savepoint
        rolled back at once, so it is never held until that transaction ends."""
        if self.is_sqlite:
            return int(self.execute(_LAST_SEQ_SQLITE).scalar_one())
        if self._depth:
            with contextlib.suppress(_Undo), self.savepoint():
                self.send(_SETTLE_SQL)
                [(last,)] = self.fetch(_LAST_SEQ_SQL)
                raise _Undo  # ROLLBACK TO SAVEPOINT releases the lock
            return int(last)
        with self._transaction("BEGIN"):
            self.send(_SETTLE_SQL)
            [(last,)] = self.fetch(_LAST_SEQ_SQL)
        return int(last)

    def _abort(self, conn: sa.Connection) -> None:
        self._depth = 0
        self._unit = False
        self._journal = []
        self._journal_sql = []
        self._driver.drop()
        try:
            conn.exec_driver_sql("ROLLBACK")
        except Exception:
            self.reset()

    def reset(self) -> None:
        """Drop the connection; the next statement opens a new one."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.invalidate()
                self._conn.close()
        self._conn = None
        self._depth = 0
        self._driver.drop()

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[sa.Connection]:
        """Run a block that can fail on its own without undoing the enclosing transaction."""
        name = f"sp{next(self._savepoints)}"
        conn = self.conn
        # At the driver (a commit takes one per attempt with effects). The SAVEPOINT goes
        # out with what is queued before it, so the queue then holds only this block's.
        self.fetch(f"SAVEPOINT {name}")
        self._depth += 1
        journaled, journaled_sql = len(self._journal), len(self._journal_sql)
        try:
            yield conn
        except BaseException:
            del self._journal[journaled:]  # what the savepoint undid is not journaled
            del self._journal_sql[journaled_sql:]
            self._driver.drop()  # statements not sent yet are undone by not sending them
            self.fetch(f"ROLLBACK TO SAVEPOINT {name}")
            self.fetch(f"RELEASE SAVEPOINT {name}")
            raise
        finally:
            self._depth -= 1
        self.send(f"RELEASE SAVEPOINT {name}")

    def _run(self, conn: sa.Connection, statement: str) -> None:
        """BEGIN, COMMIT: on PostgreSQL together with what is queued (one round trip)."""
        with self.translated():
            self._driver.fetch(self._raw, statement)

    def _before_sqlalchemy(self, conn: sa.Connection, *_: Any) -> None:
        if self._driver.queued:
            self._driver.flush(conn.connection.dbapi_connection)

    def execute(
        self, statement: sa.Executable, params: Params | None = None
    ) -> sa.CursorResult[Any]:
        return self.conn.execute(statement, params or {})

    @contextlib.contextmanager
    def translated(self) -> Iterator[None]:
        """For statements run outside a transaction (BEGIN and COMMIT themselves, a look at
        the server's statistics, an ANALYZE or a VACUUM): a driver error comes out as a
        transaction's would, a lost server as :class:`DatabaseUnavailable`, and the broken
        connection is dropped."""
        try:
            yield
        except exc.DBAPIError as error:
            self.reset()
            raise translate(self.url, error) from error

    def executemany(self, statement: sa.Executable, rows: Sequence[Params]) -> None:
        if rows:
            self.conn.execute(statement, list(rows))

    def fetch(self, statement: Statement, params: Params | None = None) -> list[Any]:
        """A hot-path statement at the driver, after what is queued; its rows as tuples."""
        return self._driver.fetch(self._raw, statement, params)

    def send(self, statement: Statement, params: Params | None = None) -> None:
        """A hot-path statement whose result nobody reads. On PostgreSQL it waits for the
        next :meth:`fetch`, other statement or COMMIT and travels in the same round trip;
        an error it raises surfaces there and fails the transaction as usual."""
        self._driver.send(self._raw, statement, params)

    def send_many(self, statement: Statement, rows: Sequence[Params]) -> None:
        self._driver.send_many(self._raw, statement, rows)

    def fetch_later(self, statement: Statement, params: Params | None = None) -> list[Any]:
        """A statement sent like :meth:`send` whose rows are wanted, but not before the
        transaction commits: the list returned holds them once the statement has run (on
        PostgreSQL with the next fetch or the COMMIT, in the same round trip)."""
        return self._driver.fetch_later(self._raw, statement, params)

    def fetch_many_later(self, statement: Statement, rows: Sequence[Params]) -> list[list[Any]]:
        """:meth:`fetch_later` of one statement once per parameter row, in order: a list of
        rows for each, filled once they have run (on PostgreSQL one ``executemany``)."""
        return self._driver.fetch_many_later(self._raw, statement, rows)

    def copy(self, table: str, columns: Sequence[Column], rows: Iterable[Sequence[Any]]) -> None:
        """Stream *rows* (tuples in the order of *columns*) into *table*, after what is
        queued: binary ``COPY`` on PostgreSQL, one ``executemany`` on SQLite. The rows are
        consumed as they are sent, so memory stays flat however many there are."""
        self._driver.copy(self._raw, table, columns, rows)

    def copying(
        self, table: str, columns: Sequence[Column]
    ) -> contextlib.AbstractContextManager[Callable[[Sequence[Any]], None]]:
        """PostgreSQL only: a binary ``COPY`` into *table* open for the block, which sends a
        row at each call of the function it yields; for rows routed to several connections
        from one thread."""
        return self._driver.copying(self._raw, table, columns)


def _seconds(value: str | tuple[str, ...] | None, default: float) -> float:
    """A URL query parameter in seconds (``?lock_timeout=10``)."""
    if value is None:
        return default
    text = value[-1] if isinstance(value, tuple) else value
    try:
        found = float(text)
    except ValueError:
        raise TrawlError(f"lock_timeout must be a number of seconds, not {text!r}") from None
    if not found > 0:
        raise TrawlError(f"lock_timeout must be positive, not {text!r}")
    return found


def _engine(
    sa_url: sa.URL, dialect: urls.Dialect, cache_mib: int, temp_in_memory: bool
) -> sa.Engine:
    if dialect == "sqlite":
        query = dict(sa_url.query)
        sync = str(query.pop("synchronous", "NORMAL")).upper()
        query.pop("lock_timeout", None)  # trawl's own (Database.lock_timeout)
        engine = sa.create_engine(
            sa_url.set(query={}), poolclass=sa.pool.NullPool, connect_args={"timeout": 60}
        )
        event.listen(engine, "connect", _sqlite_pragmas(sync, cache_mib, temp_in_memory))
        return engine
    connect: dict[str, Any] = {"connect_timeout": 10}
    if "application_name" not in sa_url.query:  # ?application_name=... in the URL wins
        # Then PGAPPNAME, as libpq reads it: the orchestrator names each actor's sessions so.
        connect["application_name"] = os.environ.get("PGAPPNAME") or "trawl"
    if "options" not in sa_url.query:  # ?options=-c... in the URL replaces these
        connect["options"] = SESSION_OPTIONS
    return sa.create_engine(sa_url, poolclass=sa.pool.NullPool, connect_args=connect)


def _sqlite_pragmas(synchronous: str, cache_mib: int, temp_in_memory: bool) -> Any:
    if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise TrawlError(
            f"sqlite synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}"
        )

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        # WAL: readers never block the writer; NORMAL is durable across a process kill
        # (a power cut may lose the last commits, which are then simply run again).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in (
            "journal_mode=WAL",
            f"synchronous={synchronous}",
            "foreign_keys=ON",
            "busy_timeout=60000",
            f"cache_size=-{cache_mib * 1024}",
        ):
            cursor.execute(f"PRAGMA {pragma}")
        if temp_in_memory:
            cursor.execute(TEMP_IN_MEMORY)
        cursor.close()

    return on_connect


def unavailable(url: str, error: BaseException) -> DatabaseUnavailable:
    reason = str(getattr(error, "orig", error)).strip().splitlines()[0] if str(error) else ""
    return DatabaseUnavailable(f"cannot reach the database at {urls.display(url)}: {reason}")


# SQLSTATEs that say "try the same transaction again": serialization_failure,
# deadlock_detected, lock_not_available (lock_timeout), idle_in_transaction_timeout.
_TRANSIENT = {"40001", "40P01", "55P03", "25P03"}


def translate(url: str, error: exc.DBAPIError) -> Exception:
    """Turn a driver error into a trawl error: unreachable, transient, or a value refused."""
    code = getattr(error.orig, "sqlstate", None)
    if code in _TRANSIENT:
        reason = str(error.orig).strip().splitlines()[0]
        return TransientConflict(f"transient conflict at {urls.display(url)} ({code}): {reason}")
    if isinstance(error, exc.DataError | exc.IntegrityError):
        reason = str(error.orig).strip().splitlines()[0]
        return DataRejected(f"the database refused a value: {reason}")
    if error.connection_invalidated or isinstance(error, exc.InterfaceError):
        return unavailable(url, error)
    if isinstance(error, exc.OperationalError):
        message = str(error.orig)
        if "no such table" in message:
            return error  # a schema problem, not a connection problem
        return unavailable(url, error)
    return error
