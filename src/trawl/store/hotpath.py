"""Hot-path statements at the driver: compiled once, and on PostgreSQL pipelined.

A worker's batch (commit what finished, claim the next) is several statements. Through
SQLAlchemy each would pay its parameter and result processing again, and on PostgreSQL each
would be a network round trip of its own. Here a statement is compiled to the driver's SQL
once, run on the DB-API connection, and on PostgreSQL a statement whose result nobody reads
(:meth:`HotPath.send`) waits in a queue: the next statement that needs a result, or the
COMMIT, goes out in one psycopg pipeline with everything queued before it, in order, so a
batch pays a round trip only where it needs an answer. On SQLite (in-process, no round
trips) ``send`` runs at once.

HotPath errors come out as SQLAlchemy's ``DBAPIError`` subclasses, the type every caller
already handles, with ``connection_invalidated`` set when the connection is gone. Each
statement is logged at DEBUG on ``trawl.sql`` as it goes to the server.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

log = logging.getLogger("trawl.sql")

Statement = sa.TextClause | str  # a str is driver SQL already ("BEGIN", "COMMIT")
Params = Mapping[str, Any]
Column = tuple[str, str]  # a column's name and its PostgreSQL type, for a binary COPY


class HotPath:
    """Runs statements on one DB-API connection; on PostgreSQL, queues what it may."""

    def __init__(self, dialect: sa.Dialect) -> None:
        self.dialect = dialect
        self.pipelined = dialect.name == "postgresql"
        # Parameters go as a dict: sqlite3 takes ``:name``, psycopg ``%(name)s``.
        named = dialect.paramstyle in ("named", "pyformat")
        cls: Any = type(dialect)
        self._compiler: sa.Dialect = dialect if named else cls(paramstyle="named")
        self._compiled: dict[sa.TextClause, str] = {}
        # (driver SQL, parameters, executemany?, where its rows go: a list for a statement,
        # a list of lists, one per parameter row, for an executemany whose rows are read)
        self._queue: list[tuple[str, Any, bool, list[Any] | None]] = []

    def sql(self, statement: Statement) -> str:
        if isinstance(statement, str):
            return statement
        text = self._compiled.get(statement)
        if text is None:
            text = self._compiled[statement] = statement.compile(dialect=self._compiler).string
        return text

    @property
    def queued(self) -> bool:
        return bool(self._queue)

    def send(self, raw: Any, statement: Statement, params: Params | None = None) -> None:
        """Run a statement whose result is not read: queued on PostgreSQL, now on SQLite."""
        self._put(raw, self.sql(statement), dict(params or {}), many=False)

    def send_many(self, raw: Any, statement: Statement, rows: Sequence[Params]) -> None:
        if rows:
            self._put(raw, self.sql(statement), [dict(r) for r in rows], many=True)

    def fetch_later(
        self, raw: Any, statement: Statement, params: Params | None = None
    ) -> list[Any]:
        """Queue a statement like :meth:`send`, and return the list its rows will be put in
        once it has run: when the pipeline goes out (with the next fetch, or the COMMIT) on
        PostgreSQL, now on SQLite. Results read only after the COMMIT cost no round trip of
        their own, and a lock the statement takes is held only while the server works."""
        rows: list[Any] = []
        self._put(raw, self.sql(statement), dict(params or {}), many=False, into=rows)
        return rows

    def fetch_many_later(
        self, raw: Any, statement: Statement, rows: Sequence[Params]
    ) -> list[list[Any]]:
        """:meth:`fetch_later` for one statement run once per parameter row: a list of rows
        for each. On PostgreSQL it is one ``executemany`` in the pipeline, whose query is
        converted and its parameters' types looked up once: in a micro-benchmark 50 us of
        client CPU a statement against 90 us as separate statements."""
        found: list[list[Any]] = [[] for _ in rows]
        if not rows:
            return found
        sql = self.sql(statement)
        if not self.pipelined:
            for params, into in zip(rows, found, strict=True):
                self._put(raw, sql, dict(params), many=False, into=into)
            return found
        self._queue.append((sql, [dict(r) for r in rows], True, found))
        return found

    def copy(
        self, raw: Any, table: str, columns: Sequence[Column], rows: Iterable[Sequence[Any]]
    ) -> None:
        """Stream rows into a table after what is queued: binary COPY on PostgreSQL (the
        rows cannot travel in a pipeline), an executemany over the iterator on SQLite."""
        if not self.pipelined:
            names = ", ".join(name for name, _ in columns)
            marks = ", ".join("?" * len(columns))
            self._put(raw, f"INSERT INTO {table} ({names}) VALUES ({marks})", rows, many=True)
            return
        with self.copying(raw, table, columns) as write:
            for row in rows:
                write(row)

    @contextlib.contextmanager
    def copying(
        self, raw: Any, table: str, columns: Sequence[Column]
    ) -> Iterator[Callable[[Sequence[Any]], None]]:
        """PostgreSQL: a binary COPY into a table, after what is queued, open for the block;
        yields the function that sends one row. Several connections' COPYs can be open at
        once, fed from one thread."""
        if not self.pipelined:
            raise TypeError("copying() is for PostgreSQL; SQLite takes copy()")
        self.flush(raw)
        names = ", ".join(name for name, _ in columns)
        sql = f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)"
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s", sql)
        try:
            with raw.cursor().copy(sql) as copy:
                copy.set_types([kind for _, kind in columns])
                yield copy.write_row
        except self.dialect.loaded_dbapi.Error as error:
            raise self._wrap(raw, sql, None, error) from error

    def fetch(self, raw: Any, statement: Statement, params: Params | None = None) -> list[Any]:
        """Run a statement after everything queued; returns its rows (tuples)."""
        return self._run(raw, self.sql(statement), dict(params or {}))

    def flush(self, raw: Any) -> None:
        """Send what is queued, and wait for it."""
        if self._queue:
            self._run(raw, None, None)

    def drop(self) -> None:
        """Forget what is queued (the transaction is being rolled back anyway)."""
        self._queue.clear()

    def _put(
        self, raw: Any, sql: str, params: Any, *, many: bool, into: list[Any] | None = None
    ) -> None:
        if self.pipelined:
            self._queue.append((sql, params, many, into))
            return
        try:
            cursor = _execute(raw.cursor(), sql, params, many=many)
            if into is not None and cursor.description is not None:
                into.extend(cursor.fetchall())
            cursor.close()
        except self.dialect.loaded_dbapi.Error as error:
            raise self._wrap(raw, sql, params, error) from error

    def _run(self, raw: Any, sql: str | None, params: Any) -> list[Any]:
        queued, self._queue = self._queue, []
        last = None
        wanted: list[tuple[Any, list[Any], bool]] = []
        try:
            if queued:
                with raw.pipeline():
                    for text, values, many, into in queued:
                        reading = many and into is not None  # fetch_many_later
                        cursor = _execute(raw.cursor(), text, values, many=many, returning=reading)
                        if into is not None:
                            wanted.append((cursor, into, many))
                    if sql is not None:
                        last = _execute(raw.cursor(), sql, params, many=False)
                for cursor, into, many in wanted:  # the pipeline is synced: all is here
                    _collect(cursor, into, many=many)
            elif sql is not None:
                last = _execute(raw.cursor(), sql, params, many=False)
            if last is None or last.description is None:
                return []
            rows: list[Any] = last.fetchall()
            return rows
        except self.dialect.loaded_dbapi.Error as error:
            raise self._wrap(raw, sql or queued[-1][0], params, error) from error

    def _wrap(self, raw: Any, sql: str, params: Any, error: Any) -> exc.DBAPIError:
        gone = self.dialect.is_disconnect(error, raw, None)
        wrapped = exc.DBAPIError.instance(
            sql,
            params,
            error,
            self.dialect.loaded_dbapi.Error,
            connection_invalidated=gone,
            dialect=self.dialect,
        )
        assert isinstance(wrapped, exc.DBAPIError)
        return wrapped


def _execute(cursor: Any, sql: str, params: Any, *, many: bool, returning: bool = False) -> Any:
    """Run *sql*; an executemany *returning* keeps each row's result (psycopg only)."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", sql)
    if returning:
        cursor.executemany(sql, params, returning=True)
    else:
        (cursor.executemany if many else cursor.execute)(sql, params)
    return cursor


def _collect(cursor: Any, into: list[Any], *, many: bool) -> None:
    """A synced statement's rows into *into*; with *many*, an ``executemany(returning=True)``'s
    into one list each (*into* holds them), its results read one after the other."""
    if not many:
        if cursor.description is not None:
            into.extend(cursor.fetchall())
        return
    for n, rows in enumerate(into):
        if n and not cursor.nextset():
            raise RuntimeError(f"executemany returned {n} results for {len(into)} rows")
        if cursor.description is not None:
            rows.extend(cursor.fetchall())
