"""CPU time a run costs, on the client side and on the PostgreSQL server's side.

Wall-clock rates on a machine other work shares move with that work; the CPU seconds a
job costs move much less. A :class:`Sampler` reads ``/proc/<pid>/stat`` of the worker
processes and of every backend connected to the run's database every ``POLL`` seconds,
with the time of each reading, so the CPU spent between two instants (the first and the
last commit, the span the steady rate is taken over) can be read back afterwards. The
readings of an instant are interpolated between the two samples around it. Without
``/proc`` access to the server's processes (a remote server) there is no server figure.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import psycopg
import sqlalchemy as sa

POLL = 0.01  # seconds between readings
_TICK = os.sysconf("SC_CLK_TCK")
_PIDS = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"


def process_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process, or None if it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


class Sampler:
    """Samples (wall time, client CPU, server CPU) while the block runs. Client processes
    are added with :meth:`watch` once started; backends are found by database name."""

    def __init__(self, url: str, *, poll: float = POLL, find_every: int = 10) -> None:
        """*poll*: seconds between readings; *find_every*: look for new backends every
        that many readings (they are rare in a run of workers; a crawl's CLI opens some
        for moments)."""
        self.poll = poll
        self.find_every = find_every
        u = sa.make_url(url)
        self.database = u.database
        self._admin = u.set(drivername="postgresql", database="postgres").render_as_string(
            hide_password=False
        )
        self._clients: list[int] = []
        self._last: dict[int, float] = {}  # pid -> its last reading (kept after it exits)
        self.samples: list[tuple[float, float, float]] = []
        self.server_readable = True
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="bench-cpu", daemon=True)

    def watch(self, pids: Sequence[int]) -> None:
        self._clients = list(pids)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join()

    def between(self, start: float, end: float) -> tuple[float, float | None]:
        """(client, server) CPU seconds spent between two ``time.time()`` instants."""
        client = self._at(end, 1) - self._at(start, 1)
        server = self._at(end, 2) - self._at(start, 2)
        return client, server if self.server_readable else None

    def _at(self, when: float, column: int) -> float:
        times = [s[0] for s in self.samples]
        i = bisect.bisect_left(times, when)
        if i == 0:
            return self.samples[0][column]
        if i == len(times):
            return self.samples[-1][column]
        (t0, *a), (t1, *b) = self.samples[i - 1], self.samples[i]
        share = (when - t0) / (t1 - t0) if t1 > t0 else 1.0
        return a[column - 1] + share * (b[column - 1] - a[column - 1])

    def _poll(self) -> None:
        with psycopg.connect(self._admin, autocommit=True) as conn:
            backends: set[int] = set()  # every backend seen, gone ones too (last reading)
            rounds = 0
            while True:
                if rounds % self.find_every == 0:
                    backends.update(pid for (pid,) in conn.execute(_PIDS, (self.database,)))
                rounds += 1
                client = sum(self._read(pid) for pid in self._clients)
                server = sum(self._read(pid, server=True) for pid in backends)
                self.samples.append((time.time(), client, server))
                if self._done.wait(self.poll):
                    return

    def _read(self, pid: int, *, server: bool = False) -> float:
        seconds = process_seconds(pid)
        if seconds is not None:
            self._last[pid] = seconds
        elif server and pid not in self._last and Path(f"/proc/{pid}").exists():
            self.server_readable = False  # there, but not ours to read
        return self._last.get(pid, 0.0)
