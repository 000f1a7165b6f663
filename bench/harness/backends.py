"""Where a benchmark's database lives: a fresh SQLite file or a fresh PostgreSQL database,
made empty or copied from a prepared one, and removed afterwards."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import psycopg
import sqlalchemy as sa

from harness.postgres import Server

# The durability both systems get on SQLite: trawl's default pragmas, applied to raw SQL too.
SQLITE_PRAGMAS = (
    "journal_mode=WAL",
    "synchronous=NORMAL",
    "busy_timeout=60000",
    "cache_size=-65536",
)


class Backend(Protocol):
    name: str

    def database(self, prefix: str) -> contextlib.AbstractContextManager[str]:
        """A new empty database; yields its URL and removes it afterwards."""
        ...

    def clone(self, url: str, prefix: str) -> contextlib.AbstractContextManager[str]:
        """A copy of the (idle) database at *url*; yields its URL."""
        ...

    def raw(self, url: str) -> Any:
        """A DB-API connection to *url*, no trawl in between (autocommit off on PostgreSQL)."""
        ...


class SQLite:
    name = "sqlite"

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="trawl-bench-sqlite-"))

    def _path(self, prefix: str) -> Path:
        return self.dir / f"{prefix}-{secrets.token_hex(3)}.db"

    @contextlib.contextmanager
    def database(self, prefix: str) -> Iterator[str]:
        path = self._path(prefix)
        try:
            yield f"sqlite:///{path}"
        finally:
            _remove_sqlite(path)

    @contextlib.contextmanager
    def clone(self, url: str, prefix: str) -> Iterator[str]:
        source = Path(sa.make_url(url).database or "")
        with contextlib.closing(sqlite3.connect(source)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        path = self._path(prefix)
        shutil.copyfile(source, path)
        try:
            yield f"sqlite:///{path}"
        finally:
            _remove_sqlite(path)

    def raw(self, url: str) -> sqlite3.Connection:
        conn = sqlite3.connect(sa.make_url(url).database or "", isolation_level=None)
        for pragma in SQLITE_PRAGMAS:
            conn.execute(f"PRAGMA {pragma}")
        return conn

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


class PostgreSQL:
    name = "postgresql"

    def __init__(self, server: Server) -> None:
        self.server = server

    @contextlib.contextmanager
    def database(self, prefix: str) -> Iterator[str]:
        with self.server.database(prefix) as url:
            yield url

    @contextlib.contextmanager
    def clone(self, url: str, prefix: str) -> Iterator[str]:
        source = sa.make_url(url).database
        with self.server.database(prefix, template=source) as copy:
            yield copy

    def raw(self, url: str) -> psycopg.Connection[Any]:
        dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        return psycopg.connect(dsn)

    def close(self) -> None:
        self.server.close()
