"""What a worker process keeps between fetches: the HTTP connection pool, the browser, the
open WARC files, the digests of payloads already archived, and the politeness gate's
caches."""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import aiohttp

from trawl.crawl import client
from trawl.crawl.browser import chromium
from trawl.crawl.browser.pool import Browsers
from trawl.crawl.client import Response
from trawl.crawl.inflight import InFlight
from trawl.crawl.options import Options, options_of
from trawl.crawl.politeness import Gate
from trawl.crawl.port import LocalPort, Port
from trawl.crawl.remote import RemotePort
from trawl.crawl.setups import Setups
from trawl.crawl.warc import WarcFiles, Written
from trawl.runtime.context import Context
from trawl.runtime.remote.run import Remote
from trawl.store.crawls import CrawlRow

POOL = 256  # connections kept open per process, across hosts


RECENT_PAYLOADS = 4096  # first copies this process remembers; older ones are looked up


class RecentPayloads:
    """The first copies of payloads this process archived lately, (crawl, digest) ->
    (url, WARC-Date), the oldest forgotten past *size*; shared by the WARC writer threads.
    Until its page commits, a first copy is known only here."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._found: OrderedDict[tuple[int, str], tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[int, str]) -> tuple[str, str] | None:
        with self._lock:
            return self._found.get(key)

    def add(self, key: tuple[int, str], first: tuple[str, str]) -> None:
        with self._lock:
            self._found[key] = first
            self._found.move_to_end(key)
            while len(self._found) > self._size:
                self._found.popitem(last=False)

    def __len__(self) -> int:
        return len(self._found)


class ProcessState:
    """Per-process crawl state, bound to one event loop."""

    def __init__(self, port: Port | None = None, warc_dir: str | None = None) -> None:
        self.gate = Gate()
        self.port: Port = port or LocalPort(self.gate)
        # A remote pipeline writes its WARC files here, named for the crawl's WARC and the
        # pipeline (the crawl's own path is on the tracker's machine).
        self.warc_dir, self.warc_suffix = warc_dir, ""
        self._client: aiohttp.ClientSession | None = None
        self.browsers = Browsers()  # starts Chromium only when a page is rendered
        self._warcs: dict[int, tuple[WarcFiles, threading.Lock]] = {}
        self._recent = RecentPayloads(RECENT_PAYLOADS)
        self.blocked: dict[str, float] = {}  # host -> until: 429s this process has seen
        self.setups = Setups()  # how long each host's last request took to connect
        self.finished: list[tuple[str, int]] = []  # requests done, slots not yet freed
        self.in_flight = InFlight()  # requests out per crawl, to the crawl's concurrency

    def take_finished(self) -> list[tuple[str, int]]:
        taken, self.finished = self.finished, []
        return taken

    def client(self) -> aiohttp.ClientSession:
        if self._client is None or self._client.closed:
            self._client = client.session(POOL)
        return self._client

    async def archive(
        self, ctx: Context, crawl: CrawlRow, resp: Response, outlinks: list[str] | None = None
    ) -> tuple[Written, bool]:
        """Write the exchange (a revisit if its payload was archived before); returns where
        the response record went and whether this is the payload's first copy."""
        known = await self.first_copy(ctx, crawl, resp)

        def write() -> tuple[Written, bool]:
            written, first = self.write_exchange(crawl, resp, known, outlinks)
            sync = self.sync_for(crawl, written)
            if sync is not None:
                sync()
            return written, first

        return await asyncio.to_thread(write)

    async def first_copy(
        self, ctx: Context, crawl: CrawlRow, resp: Response
    ) -> tuple[str, str] | None:
        """(url, WARC-Date) of the payload's first archived copy in the crawl, if any."""
        if resp.size <= 0 or resp.truncated:
            return None
        # Archived lately by this process, else as the crawl's committed pages recorded it.
        # Nothing is kept per page for the whole crawl, so a worker's memory stays flat
        # however large the crawl grows.
        known = self._recent.get((crawl.id, resp.exchange.digest))
        if known is None:
            known = await self.port.payload(ctx, crawl.id, resp.exchange.digest)
        return known

    def write_exchange(
        self,
        crawl: CrawlRow,
        resp: Response,
        known: tuple[str, str] | None,
        outlinks: list[str] | None = None,
    ) -> tuple[Written, bool]:
        """:meth:`archive`'s write, in a thread (blocking), not yet made durable (see
        :meth:`sync_for`): *known* is what :meth:`first_copy` found."""
        ex = resp.exchange
        whole = resp.size > 0 and not resp.truncated
        key = (crawl.id, ex.digest)
        files, lock = self._warc(crawl)
        # Look again under the file lock: two copies fetched at once (a page and its
        # session-id twin) must not both be stored in full.
        with lock:
            refers = (known or self._recent.get(key)) if whole else None
            written = files.write(ex, refers, outlinks)
            if whole and refers is None:  # only a payload whose record was written
                self._recent.add(key, (ex.url, ex.date))  # may be referred to
        return written, whole and refers is None

    def sync_for(self, crawl: CrawlRow, written: Written) -> Callable[[], None] | None:
        """What makes *written* durable (one fdatasync, shared by the records written
        before it), to call before the commit that records its offset; ``None`` for a crawl
        with ``warc_sync`` off."""
        if not options_of(crawl).warc_sync:
            return None
        files, _ = self._warc(crawl)
        return functools.partial(files.sync, written)

    async def archive_resource(
        self, crawl: CrawlRow, url: str, content_type: str, data: bytes, date: str
    ) -> Written:
        """Write a ``resource`` record (a page's screenshot) to the crawl's WARC."""
        files, lock = self._warc(crawl)
        durable = options_of(crawl).warc_sync

        def write() -> Written:
            with lock:
                written = files.write_resource(url, content_type, data, date)
            if durable:
                files.sync(written)
            return written

        return await asyncio.to_thread(write)

    def _warc(self, crawl: CrawlRow) -> tuple[WarcFiles, threading.Lock]:
        found = self._warcs.get(crawl.id)
        if found is None:
            options = Options.from_json(crawl.options)
            assert options.warc is not None
            info = {
                "isPartOf": f"trawl crawl {crawl.id}",
                "robots": "obey" if options.robots else "ignore",
                "description": " ".join(crawl.seeds),
            }
            files = WarcFiles(self._warc_path(options.warc), max_size=options.warc_size, info=info)
            found = self._warcs[crawl.id] = (files, threading.Lock())
        return found

    def _warc_path(self, path: str) -> str:
        if self.warc_dir is None:
            return path
        name = os.path.basename(path)
        stem = name[: -len(".warc.gz")] if name.endswith(".warc.gz") else name
        return os.path.join(self.warc_dir, f"{stem}{self.warc_suffix}.warc.gz")

    async def close(self) -> None:
        await self.port.close()
        await self.browsers.close()
        if self._client is not None:
            await self._client.close()
            self._client = None
        for files, lock in self._warcs.values():
            with lock:
                files.close()
        self._warcs.clear()


_runtimes: dict[int, ProcessState] = {}
_make: Callable[[], ProcessState] = ProcessState


def runtime() -> ProcessState:
    """The running event loop's crawl state (a worker process has one loop)."""
    key = id(asyncio.get_running_loop())
    found = _runtimes.get(key)
    if found is None:
        found = _runtimes[key] = _make()
    return found


def use(make: Callable[[], ProcessState]) -> None:
    """Make each loop's crawl state with *make* (a remote pipeline's port and WARC dir)."""
    global _make
    _make = make


def remote_crawling(remote: Remote, warc_dir: str) -> None:
    """Fetch for *remote*'s tracker: its gate decides, WARC files go to *warc_dir* with the
    pipeline's id in their names (``crawl-7-scraper-eu.warc.gz``)."""
    os.makedirs(warc_dir, exist_ok=True)
    remote.disk_path = warc_dir  # its pings report the disk the WARC files fill
    if chromium.available():  # browser pages are routed to it only if it can render them
        remote.capabilities.append(chromium.BROWSER)

    def make() -> ProcessState:
        state = ProcessState(port=RemotePort(remote.connection), warc_dir=warc_dir)
        state.warc_suffix = f"-{remote.pipeline}"
        return state

    use(make)


async def shutdown() -> None:
    """Close this loop's connections and WARC files (the crawl command calls it at exit)."""
    found = _runtimes.pop(id(asyncio.get_running_loop()), None)
    if found is not None:
        await found.close()


def close_all_sync(_: Any = None) -> None:
    """Close WARC files of every runtime (at interpreter exit, for plain workers)."""
    for rt in _runtimes.values():
        for files, lock in rt._warcs.values():
            with lock:
                files.close()


# `trawl worker trawl.crawl.app:app` has no crawl command around it to call shutdown(): its
# WARC files are synced and closed when the worker exits after SIGINT/SIGTERM.
atexit.register(close_all_sync)
