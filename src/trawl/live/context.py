"""What an actor reaches the system through: ``self.ctx``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from trawl.live.conversation import DEFAULT_TIMEOUT, Conversation
from trawl.live.registry import Where

if TYPE_CHECKING:
    from trawl.live.actor import Actor
    from trawl.live.cell import Cell
    from trawl.live.kv import SharedMap
    from trawl.live.node import Node


class Context:
    def __init__(self, node: Node, cell: Cell) -> None:
        self._node, self._cell = node, cell
        self.address = cell.address

    @property
    def node(self) -> str:
        return self._node.id

    @property
    def kv(self) -> SharedMap:
        """The cluster's shared key-value state."""
        return self._node.kv

    async def send(self, to: str, action: str, body: Any = None) -> None:
        """Put a message in *to*'s mailbox; waits while that mailbox is full."""
        await self._node.send(to, action, body, sender=self.address)

    async def ask(
        self,
        to: str,
        action: str,
        body: Any = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        schema: Any = None,
    ) -> Any:
        """Send and wait for the answer: see :meth:`trawl.live.Node.ask`."""
        return await self._node.ask(
            to, action, body, timeout=timeout, schema=schema, sender=self.address
        )

    def converse(self, to: str) -> Conversation:
        """A conversation with *to* (``async with``; ``send``, ``receive``, ``ask``)."""
        return self._node.converse(to, sender=self.address)

    def spawn(self, behaviour: Actor, name: str | None = None) -> str:
        """Start a child on this node; this actor monitors it. Returns its address."""
        address = self._node.spawn(behaviour, name)
        self._node.monitor(address, self.address)
        return address

    def monitor(self, address: str) -> None:
        """Be sent one :class:`Sentinel` (to ``on_sentinel``) when *address* stops."""
        self._node.monitor(address, self.address)

    def stop(self) -> None:
        """Stop this actor once the message being handled is done; called from a daemon
        or a concurrent action (no message in hand), at once."""
        cell = self._cell
        if cell._current is None and asyncio.current_task() is not cell.task:
            cell.stop()
        else:
            cell.stop_requested = True

    async def stop_actor(self, address: str) -> None:
        await self._node.stop_actor(address)

    async def replace(self, behaviour: Actor) -> None:
        """Become *behaviour*: same address, mailbox and monitors; the old behaviour's
        handlers and daemons are gone (its ``on_stop`` is not run); the new one's
        ``on_start`` runs and its daemons start."""
        await self._cell.replace(behaviour)

    async def register(self, service: str) -> None:
        """Offer *service* from this actor until it stops."""
        await self._node.register(service, self.address)

    async def unregister(self, service: str) -> None:
        await self._node.unregister(service, self.address)

    def lookup(self, service: str, where: Where = "mixed") -> str | None:
        return self._node.lookup(service, where)

    def lookup_all(self, service: str, where: Where = "mixed") -> list[str]:
        return self._node.lookup_all(service, where)
