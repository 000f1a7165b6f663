"""SQLite writers take turns on a file lock instead of SQLite's busy handler.

SQLite lets one writer in at a time. A writer that finds the lock taken waits in its busy
handler, which sleeps and retries (1, 2, 5, 10 ... up to 100 ms), so with two busy workers
the lock often sits free while the next writer is still asleep: two processes were barely
faster than one. An exclusive ``flock`` on ``<database>-lock``, taken before ``BEGIN
IMMEDIATE`` and dropped after ``COMMIT`` or ``ROLLBACK``, queues writers in the kernel, which
wakes the next one the moment the lock is free. The kernel also drops it when its holder
dies, however it dies.

Only trawl takes this lock; any other program writing the file still meets SQLite's own lock
and busy timeout, so nothing depends on everyone using it. A thread that already holds the
lock through another connection to the same file does not wait for itself: it goes straight
to SQLite, whose busy timeout ends that wait with an error as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time

log = logging.getLogger("trawl.store")

DEFAULT_TIMEOUT = 60.0  # seconds a writer waits for its turn (as SQLite's busy timeout)

_held: dict[str, int] = {}  # lock path -> the thread holding it, in this process
_guard = threading.Lock()


class WriterLock:
    """The lock for one SQLite file, held by one connection between BEGIN and the end."""

    def __init__(self, database: str) -> None:
        self.path = os.path.realpath(database) + "-lock"
        self._fd: int | None = None
        self._locked = False

    def acquire(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Take the lock, waiting at most *timeout* seconds (then TimeoutError): a writer
        that was stopped (SIGSTOP) or hangs while holding it must not block the rest for
        ever."""
        with _guard:
            if _held.get(self.path) == threading.get_ident():
                return  # this thread holds it through another connection: see above
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as error:
                # The lock only makes turns faster: without it SQLite's own lock still holds.
                log.debug(
                    "no writer lock at %s (%s): SQLite's busy timeout queues writers",
                    self.path,
                    error.strerror,
                )
                self._fd = -1
        if self._fd < 0:
            return
        self._wait(self._fd, timeout)
        with _guard:
            _held[self.path] = threading.get_ident()
        self._locked = True

    def _wait(self, fd: int, timeout: float) -> None:
        # A blocking flock cannot time out: poll, sleeping a little longer each time but
        # never more than 2 ms, so a freed lock is taken almost as soon as it is free.
        deadline = time.monotonic() + timeout
        pause = 0.0002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"the SQLite write lock {self.path} stayed taken") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.002)

    def release(self) -> None:
        if not self._locked or self._fd is None or self._fd < 0:
            return
        with _guard:
            _held.pop(self.path, None)
        self._locked = False
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.release()
        if self._fd is not None and self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def for_database(database: str | None) -> WriterLock | None:
    """The writer lock of an SQLite file; none for an in-memory database."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return WriterLock(database)
