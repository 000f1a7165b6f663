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
import stat
import tempfile
from pathlib import Path

from trawl.model.errors import TrawlError
from trawl.store import url as urls
from trawl.store.url import collection_id


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
    _check_private(path)
    return path


def _check_private(path: Path) -> None:
    """Lock files and logs live here: another user must not be able to plant or swap
    them (a directory made in a shared /tmp by someone else, a symlink, a loose mode)."""
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode):
        raise TrawlError(f"runtime directory {path} is not a directory (a symlink?)")
    if found.st_uid != os.geteuid():
        raise TrawlError(
            f"runtime directory {path} belongs to uid {found.st_uid}, not to you "
            f"({os.geteuid()}): set TRAWL_RUNTIME_DIR to a directory of your own"
        )
    if found.st_mode & 0o077:
        raise TrawlError(
            f"runtime directory {path} has mode {stat.S_IMODE(found.st_mode):04o}; it must "
            f"be 0700 (chmod 700 {path})"
        )


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
        # O_NOFOLLOW: a symlink planted in its place must not redirect the write.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
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
