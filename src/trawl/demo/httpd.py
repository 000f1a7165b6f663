"""A local HTTP/1.1 server for a generated :class:`~trawl.demo.site.Site`: one port per
host label on 127.0.0.1, keep-alive, TCP_NODELAY, and a request log with start times.

Tests script its misbehaviour: transient 503s or connection resets for chosen paths, and
429 + Retry-After for a host's first requests. ``python -m trawl.demo.httpd`` runs it as
a process of its own (the benchmark does, so the server does not share the crawler's CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

from trawl.demo import stamps
from trawl.demo.site import HOSTS, Key, Site, generate, host_labels, render

ACCEPT_RETRY = 0.05  # seconds before taking connections again after an error
REASONS = {200: "OK", 404: "Not Found", 429: "Too Many Requests", 503: "Service Unavailable"}


@dataclass(frozen=True, slots=True)
class Request:
    at: float  # when the request head's first bytes reached this machine (the kernel's stamp)
    host: str  # label
    path: str
    status: int


@dataclass(kw_only=True)
class Script:
    """Misbehaviour: ``fail[key]`` 503s then ``reset[key]`` dropped connections for a page's
    first requests; ``throttle[host] = (count, retry_after)`` 429s for a host's first
    requests; ``latency`` seconds before every response; ``close``: no connection is kept
    alive, as some servers do (and any server past its keep-alive timeout)."""

    fail: dict[Key, int] = field(default_factory=dict)
    reset: dict[Key, int] = field(default_factory=dict)
    throttle: dict[str, tuple[int, float]] = field(default_factory=dict)
    latency: float = 0.0
    close: bool = False  # answer each request with Connection: close, and close it


class SiteServer:
    """Serves *site* from a thread of its own; ``with SiteServer(site) as server: ...``."""

    def __init__(self, site: Site, script: Script | None = None, hosts: int = len(HOSTS)) -> None:
        self.site = site
        self.script = script or Script()
        self.labels = host_labels(hosts)
        self.log: list[Request] = []
        self.busy = 0  # requests being answered now, across hosts
        self.busiest = 0  # the most ever answered at once: a crawl's concurrency on the wire
        self.ports: dict[str, int] = {}
        self.accept_errors: list[str] = []  # connections that could not be taken, and why
        self._seen: dict[object, int] = {}
        self._cache: dict[tuple[Key, bool], tuple[str, bytes] | None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    @property
    def origin(self) -> dict[str, str]:
        return {label: f"http://127.0.0.1:{port}" for label, port in self.ports.items()}

    def url(self, key: Key) -> str:
        return self.origin[key[0]] + key[1]

    def start(self) -> SiteServer:
        self._thread = threading.Thread(target=self._run, name="trawl-site", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the site server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests(self, host: str | None = None) -> list[Request]:
        return [r for r in list(self.log) if host is None or r.host == host]

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        listeners = []
        stamping = False
        for label in self.labels:
            listener = socket.create_server(("127.0.0.1", 0), backlog=512)
            listener.setblocking(False)
            stamping = stamps.enable(listener)  # keeps the kernel's stamping on meanwhile
            self.ports[label] = listener.getsockname()[1]
            listeners.append(listener)
        if stamping:  # the first requests are stamped too, not logged at their read time
            await asyncio.to_thread(stamps.warm_up)
        accepting = [
            asyncio.create_task(self._accept(label, s))
            for label, s in zip(self.labels, listeners, strict=True)
        ]
        self._ready.set()
        await self._stop.wait()
        for task in accepting:
            task.cancel()
        for listener in listeners:
            listener.close()

    async def _accept(self, label: str, listener: socket.socket) -> None:
        """Serve each connection to *label*'s port. An error taking one (a connection
        aborted in the queue, no descriptor left) skips it: it must not end the loop, or
        the port would go on taking connections into its queue and answering none."""
        loop = asyncio.get_running_loop()
        connections: set[asyncio.Task[None]] = set()
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as error:
                self.accept_errors.append(f"{label}: {error}")
                await asyncio.sleep(ACCEPT_RETRY)  # out of descriptors: let some close
                continue
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                stamps.enable(conn)
            except OSError as error:  # reset before it was taken
                self.accept_errors.append(f"{label}: {error}")
                conn.close()
                continue
            task = asyncio.create_task(self._connection(label, conn))
            connections.add(task)
            task.add_done_callback(connections.discard)

    async def _connection(self, label: str, conn: socket.socket) -> None:
        with conn, contextlib.suppress(ConnectionError, OSError):
            buffer, at = b"", 0.0
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    data, stamp = await stamps.receive(conn)
                    if not data:
                        return
                    at = at if buffer else stamp  # a head's first bytes are its arrival
                    buffer += data
                    continue
                head, buffer = buffer[: end + 4], buffer[end + 4 :]
                if not await self._answer(label, head, at, conn):
                    return
                at = time.time()  # a pipelined head already read arrived by now

    async def _answer(self, label: str, head: bytes, at: float, conn: socket.socket) -> bool:
        lines = head.decode("latin-1").split("\r\n")
        _, path, _ = [*lines[0].split(" "), "", ""][:3]
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])
        }
        key = (label, path)
        if self._count(("reset", key)) <= self.script.reset.get(key, 0):
            self.log.append(Request(at, label, path, 0))
            return False
        self.busy += 1
        self.busiest = max(self.busiest, self.busy)
        try:
            if self.script.latency:
                await asyncio.sleep(self.script.latency)
            status, extra, body = self._respond(label, key, headers)
            self.log.append(Request(at, label, path, status))
            if self.script.close:
                extra = [*extra, ("Connection", "close")]
            reply = _head(status, extra, len(body)) + body
            await asyncio.get_running_loop().sock_sendall(conn, reply)
        finally:
            self.busy -= 1
        return not self.script.close and headers.get("connection", "").lower() != "close"

    def _respond(
        self, label: str, key: Key, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        count, wait = self.script.throttle.get(label, (0, 0.0))
        if self._count(("throttle", label)) <= count:
            return 429, [("Retry-After", f"{wait:g}"), ("Content-Type", "text/plain")], b"slow down"
        if self._count(("fail", key)) <= self.script.fail.get(key, 0):
            return 503, [("Content-Type", "text/plain")], b"try again"
        if key[1] == "/robots.txt":
            text = self.site.robots.get(label)
            if text is None:
                return 404, [("Content-Type", "text/plain")], b"no robots.txt"
            return 200, [("Content-Type", "text/plain")], text.encode()
        gz = label == "aux" and "gzip" in headers.get("accept-encoding", "")
        found = self._render(key, gz)
        if found is None:
            return 404, [("Content-Type", "text/html")], b"<html><body>not here</body></html>"
        kind, body = found
        extra = [("Content-Type", kind)] + ([("Content-Encoding", "gzip")] if gz else [])
        return 200, extra, body

    def _render(self, key: Key, gz: bool) -> tuple[str, bytes] | None:
        cached = (key, gz)
        if cached not in self._cache:
            found = render(self.site, key, self.origin)
            if found is not None and gz and found[0].startswith("text/"):
                found = (found[0], gzip.compress(found[1], mtime=0))
            self._cache[cached] = found
        return self._cache[cached]

    def _count(self, what: object) -> int:
        self._seen[what] = self._seen.get(what, 0) + 1
        return self._seen[what]


def _head(status: int, extra: list[tuple[str, str]], length: int) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}", f"Content-Length: {length}"]
    lines += ["Server: trawl-site", f"Date: {formatdate(usegmt=True)}"]
    lines += [f"{k}: {v}" for k, v in extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def truth_file(server: SiteServer, max_depth: int, path: Path) -> dict[str, int]:
    """Write the ground truth, ``{url: true depth}`` up to *max_depth*; returns it."""
    truth = {server.url(k): d for k, d in server.site.truth(max_depth).items()}
    path.write_text(json.dumps(truth, indent=0, sort_keys=True))
    return truth


@contextlib.contextmanager
def serving(pages: int = 500, seed: int = 1) -> Iterator[SiteServer]:
    with SiteServer(generate(pages, seed)) as server:
        yield server


def main(argv: list[str] | None = None) -> int:
    """``python -m trawl.demo.httpd --pages N``: serve until killed; prints the origins."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--truth", type=Path, help="write {url: depth} here")
    parser.add_argument("--truth-depth", type=int, default=10)
    args = parser.parse_args(argv)
    with serving(args.pages, args.seed) as server:
        if args.truth:
            truth_file(server, args.truth_depth, args.truth)
        print(json.dumps(server.origin), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
