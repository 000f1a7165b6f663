"""Wakes the journal's followers (the SSE stream) when entries are committed: PostgreSQL
sends a NOTIFY with every commit that wrote some; on SQLite followers look every second."""

from __future__ import annotations

import asyncio
import contextlib

from trawl.store import notify

SQLITE_POLL = 1.0  # seconds between looks for new entries where nothing announces them
POSTGRES_POLL = 30.0  # a notification missed while reconnecting is found by this


class Wakeups:
    def __init__(self, url: str) -> None:
        self._listener = notify.Listener(url, self._from_thread, channel=notify.JOURNAL_CHANNEL)
        self.poll = POSTGRES_POLL if self._listener.enabled else SQLITE_POLL
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self._listener.start()

    def stop(self) -> None:
        self._listener.stop()

    async def wait(self, within: float | None = None) -> None:
        """Until entries may have been committed, or *within* seconds (default: the poll)."""
        if self._event is None:
            self.start()
        assert self._event is not None
        event = self._event
        # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that lands as
        # the event fires (see runtime/worker.py's _wait), and a session told to stop ran on.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.poll if within is None else within):
                await event.wait()

    def _fire(self) -> None:
        if self._event is not None:
            event, self._event = self._event, asyncio.Event()
            event.set()  # every follower waiting on this generation wakes

    def _from_thread(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._fire)
