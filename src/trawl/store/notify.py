"""Wake-ups: PostgreSQL LISTEN/NOTIFY on ``trawl_work`` (new work is due) and
``trawl_journal`` (journal entries were committed); SQLite has none (readers poll)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from trawl.store import url as urls

CHANNEL = "trawl_work"
JOURNAL_CHANNEL = "trawl_journal"


class Listener:
    """Calls *on_notify* from a background thread whenever new work is announced.

    If the listening connection drops, it reconnects; workers keep polling meanwhile, so a
    lost notification only delays work by one poll interval.
    """

    def __init__(self, url: str, on_notify: Callable[[], None], channel: str = CHANNEL) -> None:
        sa_url, dialect = urls.parse(url)
        self.channel = channel
        self.enabled = dialect == "postgresql"
        self._dsn = sa_url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._on_notify = on_notify
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trawl-listen", daemon=True)

    def start(self) -> None:
        if self.enabled:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        import psycopg  # only PostgreSQL workers pay for importing the driver

        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    self._on_notify()  # anything announced while we were away
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=1.0):
                            self._on_notify()
            except psycopg.Error:
                with contextlib.suppress(Exception):
                    self._stop.wait(2.0)
