"""The tests' stamping front: a request's arrival is the kernel's, however late the server
thread gets to it; bodies and pipelined requests pass through whole."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from tests.support.stamping_front import ARRIVED, StampingFront
from trawl.demo import stamps


@asynccontextmanager
async def _front() -> AsyncIterator[tuple[StampingFront, list[tuple[float, str, bytes]]]]:
    seen: list[tuple[float, str, bytes]] = []

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append((float(request.headers[ARRIVED]), request.path, body))
        return web.Response(text=f"{request.path} {len(body)}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    front = StampingFront(runner.addresses[0][1])
    await front.start()
    try:
        yield front, seen
    finally:
        await front.close()
        await runner.cleanup()


async def _connect(port: int) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setblocking(False)
    return conn


async def _read_until(conn: socket.socket, count: int) -> bytes:
    """The answers on *conn* until *count* of them came, or it closed."""
    loop, got = asyncio.get_running_loop(), b""
    async with asyncio.timeout(10):
        while got.count(b"HTTP/1.1 ") < count:
            data = await loop.sock_recv(conn, 65536)
            if not data:
                break
            got += data
    return got


def test_arrivals_are_the_kernels_while_the_server_thread_is_held_up() -> None:
    if not stamps.warm_up():
        pytest.skip("this kernel gives no software receive stamps (SO_TIMESTAMPING)")

    async def scenario() -> list[tuple[float, str, bytes]]:
        async with _front() as (front, seen):
            first, second = await _connect(front.port), await _connect(front.port)
            first.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            # The server's loop is held up, as by a crawl holding the GIL: neither request
            # is read until both are in.
            time.sleep(0.3)  # noqa: ASYNC251 - blocking the loop is the point
            second.sendall(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
            await _read_until(first, 1)
            await _read_until(second, 1)
            first.close()
            second.close()
            return seen

    seen = asyncio.run(scenario())
    arrived = {path: at for at, path, _ in seen}
    assert arrived["/b"] - arrived["/a"] >= 0.29, seen


def test_bodies_and_pipelined_requests_pass_through_and_each_head_is_stamped() -> None:
    async def scenario() -> tuple[bytes, list[tuple[float, str, bytes]]]:
        async with _front() as (front, seen):
            conn = await _connect(front.port)
            body = b"x" * 100_000  # more than one read
            conn.sendall(
                b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
                + body
                + b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            answers = await _read_until(conn, 2)
            conn.close()
            return answers, seen

    answers, seen = asyncio.run(scenario())
    assert [(path, len(body)) for _, path, body in seen] == [("/up", 100_000), ("/next", 0)]
    assert b"/up 100000" in answers
    assert b"/next 0" in answers
    assert seen[0][0] <= seen[1][0] <= time.time()


def test_a_chunked_request_body_closes_the_connection_unanswered() -> None:
    async def scenario() -> tuple[bytes, list[tuple[float, str, bytes]]]:
        async with _front() as (front, seen):
            conn = await _connect(front.port)
            conn.sendall(
                b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n0\r\n\r\n"
            )
            answers = await _read_until(conn, 1)
            conn.close()
            return answers, seen

    answers, seen = asyncio.run(scenario())
    assert answers == b""
    assert seen == []
