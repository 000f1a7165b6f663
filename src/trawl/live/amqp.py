"""A cluster over RabbitMQ, with aio-pika.

Per cluster: a direct exchange (a node's own queues, by routing key) and a fanout exchange
(pings and registry updates, to every node). Per node: two exclusive queues, one for
messages and one for control frames, deleted by the broker when the node's connection goes
(so a killed node's backlog does not linger). Messages are taken at most ``prefetch`` at a
time and acknowledged once they are in a mailbox: a node whose mailboxes are full holds its
senders back through the broker instead of buffering without bound, while its control
queue, consumed separately, keeps it answering pings.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

from trawl.live.transport import Inbound

log = logging.getLogger(__name__)


class AmqpTransport:
    clustered = True

    def __init__(self, url: str, cluster: str = "default", *, prefetch: int = 256) -> None:
        self.url, self.cluster, self.prefetch = url, cluster, prefetch
        self.node = ""
        self._connection: Any = None
        self._direct: Any = None
        self._fanout: Any = None
        self._pumps: list[asyncio.Task[None]] = []

    async def start(self, node: str, on_message: Inbound, on_control: Inbound) -> None:
        self.node = node
        self._connection = await aio_pika.connect(self.url)
        prefix = f"trawl.live.{self.cluster}"
        publish = await self._connection.channel()
        self._direct = await publish.declare_exchange(
            f"{prefix}.direct", aio_pika.ExchangeType.DIRECT
        )
        self._fanout = await publish.declare_exchange(
            f"{prefix}.fanout", aio_pika.ExchangeType.FANOUT
        )
        for kind, handle in (("msg", on_message), ("ctl", on_control)):
            channel = await self._connection.channel()
            await channel.set_qos(prefetch_count=self.prefetch)
            queue = await channel.declare_queue(
                f"{prefix}.{node}.{kind}", exclusive=True, auto_delete=True
            )
            await queue.bind(f"{prefix}.direct", routing_key=f"{node}.{kind}")
            if kind == "ctl":
                await queue.bind(f"{prefix}.fanout")
            await queue.consume(self._inbound(handle))

    async def send(self, node: str, data: bytes, *, control: bool) -> None:
        key = f"{node}.{'ctl' if control else 'msg'}"
        await self._direct.publish(aio_pika.Message(data), routing_key=key)

    async def broadcast(self, data: bytes) -> None:
        await self._fanout.publish(aio_pika.Message(data), routing_key="")

    async def close(self) -> None:
        for pump in self._pumps:
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        self._pumps = []
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    def _inbound(self, handle: Inbound) -> Any:
        """aio-pika runs each delivery's callback as a task of its own, so a callback that
        waited (on a full mailbox) could be overtaken; deliveries go through one queue
        (at most ``prefetch`` long) to one pump, which keeps their order."""
        queue: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()

        async def pump() -> None:
            while True:
                message = await queue.get()
                try:
                    await handle(message.body)
                except Exception:
                    log.exception("inbound frame failed")
                await message.ack()

        self._pumps.append(asyncio.create_task(pump(), name=f"amqp inbound of {self.node}"))

        async def deliver(message: AbstractIncomingMessage) -> None:
            queue.put_nowait(message)

        return deliver
