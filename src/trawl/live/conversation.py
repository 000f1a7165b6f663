"""Conversations: messages correlated by an id, each wait bounded by a timeout.

Both ends of a conversation hold a waiter keyed by (their address, the conversation's id)
that takes only what the peer sends under that id; anything else under the id (a reply after
the waiter gave up, or a message from another sender) is dropped and counted by the node, so
it can never reach the wrong waiter. An ask is a conversation of one exchange.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import msgspec

from trawl.live.errors import AskTimeout, RemoteError, SchemaError
from trawl.live.frames import Envelope

if TYPE_CHECKING:
    from trawl.live.node import Node

DEFAULT_TIMEOUT = 5.0


class Conversation:
    def __init__(self, node: Node, me: str, peer: str, conv: str) -> None:
        self.node, self.me, self.peer, self.id = node, me, peer, conv
        self.replied = False
        self._inbox: asyncio.Queue[Envelope] = asyncio.Queue()
        self._open = True
        node._waiters[(me, conv)] = self

    def offer(self, envelope: Envelope) -> bool:
        """Take *envelope* if it is the peer's; the node counts what is refused."""
        if envelope.sender != self.peer or not self._open:
            return False
        self._inbox.put_nowait(envelope)
        return True

    async def send(self, action: str, body: Any = None) -> None:
        """The next message of the exchange, to the peer's *action*."""
        await self.node._post(
            Envelope(to=self.peer, action=action, body=body, sender=self.me, conv=self.id)
        )

    async def reply(self, body: Any = None) -> None:
        """An answer within the exchange (what an action's return value becomes)."""
        self.replied = True
        await self.node._post(
            Envelope(to=self.peer, body=body, sender=self.me, conv=self.id, reply=True)
        )

    async def fail(self, error: str) -> None:
        self.replied = True
        await self.node._post(
            Envelope(to=self.peer, sender=self.me, conv=self.id, reply=True, error=error)
        )

    async def receive(self, timeout: float = DEFAULT_TIMEOUT, schema: Any = None) -> Any:
        """The peer's next message body (checked against *schema* if given). Raises
        :class:`AskTimeout` after *timeout* seconds and :class:`RemoteError` if the peer's
        handler failed."""
        try:
            async with asyncio.timeout(timeout):
                envelope = await self._inbox.get()
        except TimeoutError:
            raise AskTimeout(
                f"no answer from {self.peer} within {timeout:g}s (conversation {self.id})"
            ) from None
        if envelope.error is not None:
            kind, _, message = envelope.error.partition(": ")
            raise RemoteError(kind, message)
        return check(envelope.body, schema, f"answer from {self.peer}") if schema else envelope.body

    async def ask(
        self, action: str, body: Any = None, *, timeout: float = DEFAULT_TIMEOUT, schema: Any = None
    ) -> Any:
        await self.send(action, body)
        return await self.receive(timeout, schema)

    def close(self) -> None:
        if self._open:
            self._open = False
            self.node._waiters.pop((self.me, self.id), None)

    async def __aenter__(self) -> Conversation:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def check(body: Any, schema: Any, what: str) -> Any:
    """*body* as *schema*, or :class:`SchemaError` naming the field that did not match."""
    if schema is Any or schema is None:
        return body
    if isinstance(schema, type) and isinstance(body, schema):
        return body
    if isinstance(body, msgspec.Struct):
        body = msgspec.to_builtins(body)
    try:
        return msgspec.convert(body, schema)
    except msgspec.ValidationError as error:
        raise SchemaError(f"{what}: {error}") from None
