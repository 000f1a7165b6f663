"""``live``: the live layer (trawl.live), which has no database: measured once, on the
first backend's pass.

- ``live send``: messages/s from one sender into one actor's mailbox (20,000, then an ask
  that waits for the last), beside a bare ``asyncio.Queue`` producer/consumer.
- ``live ask``: ask round trip to an actor on the same node (p50), beside a request/reply
  through two bare asyncio queues.
- ``live ask over RabbitMQ``: ask round trip between two nodes over the machine's RabbitMQ
  (p50, p99 in extra), beside a raw aio-pika request/reply (reply_to + correlation_id) on
  the same broker in the same run.
- ``live sessions``: round trip of a WebSocket request to a session (p50, p99 in extra)
  with 1,000 sessions open at once on one server process, beside one session alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import aio_pika

from harness.backends import Backend
from harness.plan import Plan
from harness.progress import say
from harness.rows import Row, set_ratio
from trawl.live import Actor, AmqpTransport, Node, action

AMQP = os.environ.get("TRAWL_BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
SEND = "live send"
ASK = "live ask"
REMOTE = "live ask over RabbitMQ"
SESSIONS = "live sessions"


class Sink(Actor):
    def __init__(self) -> None:
        self.count = 0

    @action()
    async def put(self, message: int) -> None:
        self.count += 1

    @action()
    async def echo(self, message: int) -> int:
        return message


def run(plan: Plan, backend: Backend) -> list[Row]:
    if backend.name != "sqlite":
        return []
    quick = plan.name != "full"
    rows: list[Row] = []
    sends = 5_000 if quick else 20_000
    raw_send = _row(
        plan, SEND, "asyncio.Queue", "messages/s", "higher", lambda: asyncio.run(_queue_rate(sends))
    )
    live_send = _row(
        plan, SEND, "Node.send", "messages/s", "higher", lambda: asyncio.run(_send_rate(sends))
    )
    set_ratio(live_send, raw_send)
    asks = 2_000 if quick else 10_000
    raw_ask = _row(
        plan, ASK, "two asyncio queues", "us", "lower", lambda: asyncio.run(_queue_rtt(asks))
    )
    live_ask = _row(plan, ASK, "Node.ask", "us", "lower", lambda: asyncio.run(_ask_rtt(asks)))
    set_ratio(live_ask, raw_ask)
    rows += [raw_send, live_send, raw_ask, live_ask]
    remote_asks = 300 if quick else 2_000
    raw_amqp = _row(
        plan,
        REMOTE,
        "raw aio-pika request/reply",
        "ms",
        "lower",
        lambda: asyncio.run(_pika_rtt(remote_asks)),
    )
    live_amqp = _row(
        plan,
        REMOTE,
        "Node.ask across two nodes",
        "ms",
        "lower",
        lambda: asyncio.run(_remote_rtt(remote_asks)),
    )
    set_ratio(live_amqp, raw_amqp)
    rows += [raw_amqp, live_amqp]
    many = 1_000
    one = _row(plan, SESSIONS, "1 session", "ms", "lower", lambda: _sessions(1, 50))
    crowd = _row(
        plan, SESSIONS, f"{many} sessions at once", "ms", "lower", lambda: _sessions(many, 5)
    )
    set_ratio(crowd, one)
    return [*rows, one, crowd]


def _row(plan: Plan, workload: str, variant: str, unit: str, better: str, measure) -> Row:  # type: ignore[no-untyped-def]
    runs, p99s = [], []
    for i in range(plan.runs):
        value, p99 = measure()
        runs.append(value)
        p99s.append(p99)
        say(f"  trawl {workload} ({variant}) run {i + 1}: {value:,.2f} {unit}")
    extra = {"p99": p99s} if any(p is not None for p in p99s) else {}
    return Row(
        system="trawl",
        backend="none",
        workload=workload,
        variant=variant,
        unit=unit,
        better=better,
        runs=runs,
        extra=extra,
    )  # type: ignore[arg-type]


def _percentiles(seconds: list[float], scale: float) -> tuple[float, float]:
    ordered = sorted(s * scale for s in seconds)
    return statistics.median(ordered), ordered[max(0, int(len(ordered) * 0.99) - 1)]


async def _queue_rate(n: int) -> tuple[float, None]:
    queue: asyncio.Queue[int] = asyncio.Queue(1000)

    async def consume() -> None:
        for _ in range(n):
            await queue.get()

    started = time.perf_counter()
    task = asyncio.create_task(consume())
    for i in range(n):
        await queue.put(i)
    await task
    return n / (time.perf_counter() - started), None


async def _send_rate(n: int) -> tuple[float, None]:
    async with Node("bench") as node:
        address = node.spawn(Sink(), "sink")
        started = time.perf_counter()
        for i in range(n):
            await node.send(address, "put", i)
        await node.ask(address, "echo", 0)
        return n / (time.perf_counter() - started), None


async def _queue_rtt(n: int) -> tuple[float, float]:
    requests: asyncio.Queue[tuple[int, asyncio.Future[int]]] = asyncio.Queue()

    async def serve() -> None:
        while True:
            value, reply = await requests.get()
            reply.set_result(value)

    task = asyncio.create_task(serve())
    taken = []
    loop = asyncio.get_running_loop()
    for i in range(n):
        started = time.perf_counter()
        future: asyncio.Future[int] = loop.create_future()
        await requests.put((i, future))
        await future
        taken.append(time.perf_counter() - started)
    task.cancel()
    return _percentiles(taken, 1e6)


async def _ask_rtt(n: int) -> tuple[float, float]:
    async with Node("bench") as node:
        address = node.spawn(Sink(), "sink")
        taken = []
        for i in range(n):
            started = time.perf_counter()
            await node.ask(address, "echo", i)
            taken.append(time.perf_counter() - started)
        return _percentiles(taken, 1e6)


async def _remote_rtt(n: int) -> tuple[float, float]:
    cluster = f"bench-{uuid.uuid4().hex[:8]}"
    async with (
        Node("a", transport=AmqpTransport(AMQP, cluster)) as a,
        Node("b", transport=AmqpTransport(AMQP, cluster)) as b,
    ):
        while "b" not in a.members:  # noqa: ASYNC110 (membership has no event)
            await asyncio.sleep(0.05)
        address = b.spawn(Sink(), "sink")
        for i in range(20):  # warm up
            await a.ask(address, "echo", i)
        taken = []
        for i in range(n):
            started = time.perf_counter()
            await a.ask(address, "echo", i)
            taken.append(time.perf_counter() - started)
        return _percentiles(taken, 1e3)


async def _pika_rtt(n: int) -> tuple[float, float]:
    """The textbook RPC: a server queue, an exclusive reply queue, correlation ids."""
    name = f"bench-rpc-{uuid.uuid4().hex[:8]}"
    server = await aio_pika.connect(AMQP)
    client = await aio_pika.connect(AMQP)
    try:
        s_channel = await server.channel()
        requests = await s_channel.declare_queue(name, exclusive=True, auto_delete=True)

        async def on_request(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            async with message.process():
                await s_channel.default_exchange.publish(
                    aio_pika.Message(message.body, correlation_id=message.correlation_id),
                    routing_key=message.reply_to or "",
                )

        await requests.consume(on_request)
        c_channel = await client.channel()
        replies = await c_channel.declare_queue(exclusive=True, auto_delete=True)
        waiting: dict[str, asyncio.Future[bytes]] = {}

        async def on_reply(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            future = waiting.pop(message.correlation_id or "", None)
            if future is not None:
                future.set_result(message.body)
            await message.ack()

        await replies.consume(on_reply)
        loop = asyncio.get_running_loop()
        taken = []
        for i in range(n + 20):
            started = time.perf_counter()
            cid = str(i)
            waiting[cid] = loop.create_future()
            await c_channel.default_exchange.publish(
                aio_pika.Message(json.dumps(i).encode(), correlation_id=cid, reply_to=replies.name),
                routing_key=name,
            )
            await waiting[cid]
            if i >= 20:
                taken.append(time.perf_counter() - started)
        return _percentiles(taken, 1e3)
    finally:
        await client.close()
        await server.close()


SERVER = Path(__file__).with_name("live_echo.py")


def _sessions(count: int, each: int) -> tuple[float, float]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        return asyncio.run(_crowd(f"ws://127.0.0.1:{port}/", count, each))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _crowd(url: str, count: int, each: int) -> tuple[float, float]:
    from websockets.asyncio.client import connect

    taken: list[float] = []
    opened = asyncio.Barrier(count)

    async def one(n: int) -> None:
        async with connect(url, open_timeout=60) as ws:
            await ws.send(json.dumps({"hello": "echo", "protocol": 1}))
            await ws.recv()
            await opened.wait()  # every session is open before any is timed
            for i in range(each):
                started = time.perf_counter()
                await ws.send(json.dumps({"action": "echo", "body": i, "id": str(i)}))
                await ws.recv()
                taken.append(time.perf_counter() - started)
                await asyncio.sleep(0.5)  # within the 2 frames/s every client is allowed

    await asyncio.gather(*(one(n) for n in range(count)))
    return _percentiles(taken, 1e3)
