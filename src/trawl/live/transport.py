"""How frames travel between nodes.

A transport gives a node two inbound streams: messages (which may wait on a full mailbox,
and so hold the sender back) and control frames (pings, monitors, registry updates), which
never wait behind messages, so a busy node is not mistaken for a dead one.

:class:`Loopback` is the default: one node, no cluster, nothing to install. :class:`MemoryHub`
connects nodes of one process through bounded queues, frames encoded as on the wire (tests
use it to make a node fall silent). :class:`trawl.live.amqp.AmqpTransport` is the real one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from trawl.live.errors import NodeLost

Inbound = Callable[[bytes], Awaitable[None]]


class Transport(Protocol):
    clustered: bool

    async def start(self, node: str, on_message: Inbound, on_control: Inbound) -> None: ...

    async def send(self, node: str, data: bytes, *, control: bool) -> None: ...

    async def broadcast(self, data: bytes) -> None:
        """To every node's control stream, this one's included."""

    async def close(self) -> None: ...


class Loopback:
    """A node on its own: there is no other node to reach."""

    clustered = False

    async def start(self, node: str, on_message: Inbound, on_control: Inbound) -> None:
        self.node = node

    async def send(self, node: str, data: bytes, *, control: bool) -> None:
        raise NodeLost(f"node {node}: this node is not in a cluster")

    async def broadcast(self, data: bytes) -> None:
        pass

    async def close(self) -> None:
        pass


class _Port:
    def __init__(self, on_message: Inbound, on_control: Inbound, size: int) -> None:
        self.messages: asyncio.Queue[bytes] = asyncio.Queue(size)
        self.control: asyncio.Queue[bytes] = asyncio.Queue()
        self.tasks = [
            asyncio.create_task(_pump(self.messages, on_message)),
            asyncio.create_task(_pump(self.control, on_control)),
        ]


async def _pump(queue: asyncio.Queue[bytes], handle: Inbound) -> None:
    while True:
        data = await queue.get()
        try:
            await handle(data)
        except Exception:  # a bad frame must not stop the node's inbound stream
            import logging

            logging.getLogger(__name__).exception("inbound frame failed")


class MemoryHub:
    """Nodes in one process, as if on a network. :meth:`silence` makes a node fall silent
    (what a kill -9 looks like to the others)."""

    def __init__(self, queue_size: int = 1000) -> None:
        self.queue_size = queue_size
        self._ports: dict[str, _Port] = {}
        self._silent: set[str] = set()

    def transport(self) -> MemoryTransport:
        return MemoryTransport(self)

    async def silence(self, node: str) -> None:
        self._silent.add(node)
        port = self._ports.pop(node, None)
        if port is not None:
            for task in port.tasks:
                task.cancel()
            await asyncio.gather(*port.tasks, return_exceptions=True)


class MemoryTransport:
    clustered = True

    def __init__(self, hub: MemoryHub) -> None:
        self.hub = hub
        self.node = ""

    async def start(self, node: str, on_message: Inbound, on_control: Inbound) -> None:
        self.node = node
        self.hub._ports[node] = _Port(on_message, on_control, self.hub.queue_size)

    async def send(self, node: str, data: bytes, *, control: bool) -> None:
        port = self.hub._ports.get(node)
        if port is None or self.node in self.hub._silent:
            return  # like an unroutable message: the network does not say
        await (port.control if control else port.messages).put(data)

    async def broadcast(self, data: bytes) -> None:
        if self.node in self.hub._silent:
            return
        for port in list(self.hub._ports.values()):
            port.control.put_nowait(data)

    async def close(self) -> None:
        await self.hub.silence(self.node)
        self.hub._silent.discard(self.node)
