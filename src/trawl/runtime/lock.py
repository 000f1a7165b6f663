"""One orchestrator per collection per machine: an exclusive ``flock`` on a lock file.

The file lives in a per-user runtime directory and is named after a hash of the database
(an SQLite file's resolved path, or the PostgreSQL URL without its password). The kernel
drops a ``flock`` when its holder dies, however it dies, so a lock left by a killed
orchestrator is simply taken over: there is no stale-pid check to get wrong (the bug of
ArchiveBox #1849, where a dead orchestrator's pid file was obeyed forever). The pid written
in the file is only there to name the running orchestrator in the refusal message.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from pathlib import Path

import sqlalchemy as sa

from trawl.model.errors import TrawlError
from trawl.store import url as urls


class OrchestratorRunning(TrawlError):
    """Another orchestrator holds the collection's lock on this machine."""


def runtime_dir() -> Path:
    """``$TRAWL_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/trawl``, else a per-user temp dir."""
    if explicit := os.environ.get("TRAWL_RUNTIME_DIR"):
        path = Path(explicit)
    elif xdg := os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(xdg) / "trawl"
    else:
        path = Path(tempfile.gettempdir()) / f"trawl-{os.getuid()}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def collection_id(url: str) -> str:
    """The same string for every spelling of one database's URL on this machine."""
    parsed, dialect = urls.parse(url)
    if dialect == "sqlite":
        database = parsed.database or ""
        where = str(Path(database).resolve()) if database not in ("", ":memory:") else database
        return f"sqlite:{where}"
    plain = sa.URL.create(
        "postgresql",
        username=parsed.username,
        host=parsed.host or "localhost",
        port=parsed.port or 5432,
        database=parsed.database,
    )
    return plain.render_as_string(hide_password=True)


def lock_path(url: str) -> Path:
    digest = hashlib.sha256(collection_id(url).encode()).hexdigest()[:20]
    return runtime_dir() / f"orchestrator-{digest}.lock"


class OrchestratorLock:
    """Held while the orchestrator runs; ``acquire`` refuses, naming the holder's pid."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = lock_path(url)
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by actors
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise OrchestratorRunning(
                f"another orchestrator (pid {holder or 'unknown'}) is already running on "
                f"{urls.display(self.url)} on this machine; stop it first (lock: {self.path})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{collection_id(self.url)}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)  # before unlocking: the next holder writes its own pid
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> OrchestratorLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 64, 0).decode(errors="replace").split("\n", 1)[0].strip()
    except OSError:
        return ""
