"""A front for a test server in the tests' own process: it tells the server when each
request reached this machine, as the kernel stamped it.

A server thread that stamps a request when its handler runs is late by however long it
waited for the GIL, and a crawl in the same process (a full garbage collection of a long
pytest worker, a browser's traffic) can hold that for a sizable part of a second: two
requests sent 0.4 s apart were once logged 0.12 s apart. The front accepts the
connections, reads them with the kernel's receive stamps (trawl.demo.stamps), and forwards
each request to the server with an ``X-Arrived`` header, the stamp of its head's first
bytes on this machine's clock (``time.time``). Request bodies are forwarded as they are
(``Content-Length``; a chunked request body is not supported: the connection is closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Coroutine
from typing import Any

from trawl.demo import stamps

ARRIVED = "X-Arrived"


class StampingFront:
    """``front = StampingFront(backend_port); await front.start()``; ``front.port`` is
    where clients connect; ``await front.close()`` ends every connection."""

    def __init__(self, backend_port: int) -> None:
        self.backend_port = backend_port
        self.port = 0
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        listener.setblocking(False)
        stamping = stamps.enable(listener)  # accepted sockets inherit it
        self._listener, self.port = listener, listener.getsockname()[1]
        if stamping:  # the kernel turns stamping on a moment after a first socket asks
            await asyncio.to_thread(stamps.warm_up)
        self._spawn(self._accept(listener))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            stamps.enable(conn)
            self._spawn(self._connection(conn))

    async def _connection(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(ConnectionError, OSError):
            reader, writer = await asyncio.open_connection("127.0.0.1", self.backend_port)
            back = asyncio.ensure_future(_answers(reader, conn))
            try:
                await _requests(conn, writer)
            finally:
                back.cancel()
                await asyncio.gather(back, return_exceptions=True)
                writer.close()


async def _requests(conn: socket.socket, writer: asyncio.StreamWriter) -> None:
    """Client to server: each head gets its arrival; bodies pass through. Bytes are handled
    as soon as they are read, so bytes left over once a request is through came in the
    latest read: a pipelined head's arrival is that read's stamp."""
    buffer, last, body_left = b"", 0.0, 0
    at: float | None = None  # the arrival of the head being read, once its bytes came
    while True:
        if body_left and buffer:
            part, buffer = buffer[:body_left], buffer[body_left:]
            body_left -= len(part)
            writer.write(part)
            continue
        if not body_left and buffer and at is None:
            at = last
        end = -1 if body_left else buffer.find(b"\r\n\r\n")
        if end >= 0 and at is not None:
            head, buffer = buffer[: end + 2], buffer[end + 4 :]
            length = _content_length(head)
            if length is None:
                return  # a chunked body: not something these sites are sent
            writer.write(head + f"{ARRIVED}: {at:.6f}\r\n\r\n".encode())
            await writer.drain()
            body_left, at = length, None
            continue
        data, last = await stamps.receive(conn)
        if not data:
            return
        buffer += data


async def _answers(reader: asyncio.StreamReader, conn: socket.socket) -> None:
    """Server to client, as it comes; the client's connection ends with the server's."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            await loop.sock_sendall(conn, data)
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


def _content_length(head: bytes) -> int | None:
    """The body's length after *head* (0 without one); None for a chunked body."""
    length = 0
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "transfer-encoding" and "chunked" in value.lower():
            return None
        if name == "content-length":
            length = int(value.strip())
    return length
