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

from harness import postgres
from harness.postgres import Server

# What every system gets on SQLite: trawl's pragmas, applied to raw SQL and huey too, with
# the backend's synchronous level.
SQLITE_PRAGMAS = ("journal_mode=WAL", "busy_timeout=60000", "cache_size=-16384")


def sqlite_pragmas(synchronous: str) -> tuple[str, ...]:
    return (*SQLITE_PRAGMAS, f"synchronous={synchronous}")


class Backend(Protocol):
    name: str  # what rows say: "sqlite", "sqlite-full", "postgresql"
    dialect: str  # the SQL it speaks: "sqlite" or "postgresql"
    synchronous: str | None  # SQLite's level; None on PostgreSQL (its server settings rule)

    def database(self, prefix: str) -> contextlib.AbstractContextManager[str]:
        """A new empty database; yields its URL and removes it afterwards."""
        ...

    def clone(self, url: str, prefix: str) -> contextlib.AbstractContextManager[str]:
        """A copy of the (idle) database at *url*; yields its URL."""
        ...

    def raw(self, url: str) -> Any:
        """A DB-API connection to *url*, no trawl in between (autocommit off on PostgreSQL)."""
        ...

    def checkpoint(self) -> bool:
        """Before a run that writes a lot: the server's dirty pages written out first, so
        the run before does not leave it a checkpoint to pay for. False if not done."""
        ...


class SQLite:
    """SQLite files in WAL mode. ``synchronous=NORMAL`` (trawl's default, backend ``sqlite``)
    syncs the WAL at checkpoints: a process crash loses nothing, a power cut may lose the
    last commits. ``FULL`` (backend ``sqlite-full``) syncs it at every commit, as huey's
    storage does by default and as PostgreSQL with fsync and synchronous_commit on does."""

    dialect = "sqlite"

    def __init__(self, synchronous: str = "NORMAL") -> None:
        self.synchronous = synchronous
        self.name = "sqlite" if synchronous == "NORMAL" else f"sqlite-{synchronous.lower()}"
        self.pragmas = sqlite_pragmas(synchronous)
        self.dir = Path(tempfile.mkdtemp(prefix="trawl-bench-sqlite-"))

    def _path(self, prefix: str) -> Path:
        return self.dir / f"{prefix}-{secrets.token_hex(3)}.db"

    @contextlib.contextmanager
    def database(self, prefix: str) -> Iterator[str]:
        path = self._path(prefix)
        try:
            yield self._url(path)
        finally:
            _remove_sqlite(path)

    def _url(self, path: Path) -> str:
        """trawl takes the level from the URL (``?synchronous=FULL``)."""
        query = "" if self.synchronous == "NORMAL" else f"?synchronous={self.synchronous}"
        return f"sqlite:///{path}{query}"

    @contextlib.contextmanager
    def clone(self, url: str, prefix: str) -> Iterator[str]:
        source = Path(sa.make_url(url).database or "")
        with contextlib.closing(sqlite3.connect(source)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        path = self._path(prefix)
        shutil.copyfile(source, path)
        try:
            yield self._url(path)
        finally:
            _remove_sqlite(path)

    def checkpoint(self) -> bool:
        return False  # each run has a file of its own, checkpointed as it closes

    def raw(self, url: str) -> sqlite3.Connection:
        conn = sqlite3.connect(sa.make_url(url).database or "", isolation_level=None)
        for pragma in self.pragmas:
            conn.execute(f"PRAGMA {pragma}")
        return conn

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


class PostgreSQL:
    name = dialect = "postgresql"
    synchronous = None

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

    def checkpoint(self) -> bool:
        return self.server.checkpoint()

    def raw(self, url: str) -> psycopg.Connection[Any]:
        dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        return psycopg.connect(dsn)

    def close(self) -> None:
        self.server.close()


def open_backend(name: str) -> SQLite | PostgreSQL:
    """``sqlite``, ``sqlite-full`` or ``postgresql`` (BENCH_PG, the local server, or a
    throwaway cluster)."""
    if name.startswith("sqlite"):
        return SQLite("FULL" if name == "sqlite-full" else "NORMAL")
    return PostgreSQL(postgres.connect())
