"""A WebSocket session: one actor per connection, its inbound frames schema-gated.

The client says hello with the session type and the protocol version it speaks; the server
spawns the session's actor and welcomes it. From then on the client calls the session's
``@action(client=True)`` actions, each message checked against the action's schema; the
session pushes events, and can ask the client a question and wait for the answer with a
timeout. Closing the socket stops the session; stopping the session closes the socket.

Frames (JSON text), client to server::

    {"hello": "counter", "protocol": 1}
    {"action": "add", "body": {"n": 2}, "id": "c1"}      # id: optional, asks for a reply
    {"answer": "<query id>", "body": ...}                # to a server query

server to client::

    {"welcome": {"session": "counter", "protocol": 1, "address": "node:counter-1a2b"}}
    {"reply": "c1", "body": ...}   or   {"reply": "c1", "error": {"type": ..., "message": ...}}
    {"error": {"type": ..., "message": ...}}            # about a frame without an id
    {"event": "total", "body": ...}
    {"query": "<id>", "action": "confirm", "body": ...}
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from trawl.live.actor import Actor
from trawl.live.conversation import DEFAULT_TIMEOUT
from trawl.live.frames import Sentinel

# Close codes (4000-4999 are the application's).
NORMAL = 1000
TOO_BIG = 1009
CRASHED = 1011
BAD_FRAME = 4400
UNAUTHORIZED = 4401
UNKNOWN_SESSION = 4404
HELLO_TIMEOUT = 4408
PROTOCOL_MISMATCH = 4426
RATE_LIMITED = 4429


class Link(Protocol):
    async def close(self, code: int, reason: str = "") -> None: ...


class Session(Actor):
    """Subclass with ``type`` (the name a client asks for) and ``protocol`` (the version of
    the frames it speaks); declare the client's actions with ``@action(client=True)``."""

    type: ClassVar[str]
    protocol: ClassVar[int] = 1
    client: str
    hello: Any = None  # what the framing took from the client's hello (None: nothing)
    identity: Any = None  # who the server's authorize said the client is (None: anyone)
    _link: Link | None = None

    async def push(self, event: str, body: Any = None) -> None:
        """An event to the client (waits while the client is slow to read)."""
        await self.ctx.send(self.client, event, body)

    async def query(
        self, action: str, body: Any = None, *, timeout: float = DEFAULT_TIMEOUT, schema: Any = None
    ) -> Any:
        """Ask the client and wait at most *timeout* seconds for its answer."""
        return await self.ctx.ask(self.client, action, body, timeout=timeout, schema=schema)

    async def _after_stop(self, sentinel: Sentinel) -> None:
        if self._link is not None:
            if sentinel.outcome == "crashed":
                await self._link.close(CRASHED, "the session crashed")
            else:
                await self._link.close(NORMAL, "the session ended")
