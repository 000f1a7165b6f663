"""The WebSocket endpoint of the live layer, as a plain ASGI application.

It needs no web framework: ``trawl serve`` mounts it beside the HTTP API at ``/live``, and a
program of its own can hand it to uvicorn directly. See :mod:`trawl.live.session` for the
frames a client speaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import msgspec

from trawl.live import session as codes
from trawl.live.bucket import TokenBucket
from trawl.live.frames import Envelope
from trawl.live.framing import Answer, BadFrame, Framing, LiveFraming, Refused
from trawl.live.node import Node
from trawl.live.session import Session

log = logging.getLogger(__name__)

# Actions the node itself sends to actors; never accepted in a frame from a client.
SYSTEM_ACTIONS = frozenset({"sentinel"})
SLOWED_WARNING_EVERY = 10.0  # seconds between warnings that a session's frames are slowed

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
# What *authorize* answers: False or None refuses; True admits; anything else admits and is
# handed to the session as its ``identity``.
Authorize = Callable[[Scope], Awaitable[Any]]

_encode = msgspec.json.Encoder().encode


class Socket:
    """One connection's sending side: one frame at a time, nothing after the close."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = asyncio.Lock()
        self.closed = False

    async def send(self, frame: dict[str, Any]) -> None:
        async with self._lock:
            if not self.closed:
                try:
                    await self._send({"type": "websocket.send", "text": _encode(frame).decode()})
                except Exception:  # the client went away; the reader sees the disconnect
                    self.closed = True

    async def close(self, code: int, reason: str = "") -> None:
        async with self._lock:
            if not self.closed:
                self.closed = True
                with contextlib.suppress(Exception):
                    await self._send(
                        {"type": "websocket.close", "code": code, "reason": reason[:120]}
                    )


class LiveApp:
    """Serve *sessions* (Session subclasses, by their ``type``) on *node*.

    *authorize* sees the connection's ASGI scope before the handshake is accepted: False or
    None refuses it (HTTP 401 where the server can say so, else close code 4401), True
    admits it, and anything else admits it and becomes the session's ``identity``.
    *framing* is the shape of the frames (:class:`~trawl.live.framing.LiveFraming` by
    default). Frames over *max_frame* bytes close the connection (1009); a
    client pacing is a token bucket of *burst* tokens refilled at *rate* per second, cut
    after *cut_after* tokens of debt (4429). The hello must come within *hello_timeout*.
    When *node* is a factory, the app starts and stops it on ASGI lifespan events, and
    awaits *setup* with it once started (to spawn the actors the sessions need).
    """

    def __init__(
        self,
        node: Node | Callable[[], Node],
        sessions: Iterable[type[Session]],
        *,
        authorize: Authorize | None = None,
        max_frame: int = 64 * 1024,
        hello_timeout: float = 5.0,
        burst: int = 10,
        rate: float = 2.0,
        cut_after: int = 10,
        setup: Callable[[Node], Awaitable[None]] | None = None,
        framing: Framing | None = None,
    ) -> None:
        self._factory = None if isinstance(node, Node) else node
        self._setup = setup
        self.node: Node | None = node if isinstance(node, Node) else None
        self.sessions: dict[str, type[Session]] = {}
        for cls in sessions:
            name = getattr(cls, "type", None)
            if not isinstance(name, str) or not name:
                raise TypeError(f"session class {cls.__name__} needs a `type` name")
            if name in self.sessions:
                raise ValueError(f"two session classes are named {name!r}")
            self.sessions[name] = cls
        self.authorize = authorize
        self.framing: Framing = framing or LiveFraming()
        self.max_frame, self.hello_timeout = max_frame, hello_timeout
        self.bucket = (burst, rate, cut_after)
        TokenBucket(burst, rate, cut_after)  # checks the numbers now, not at the first client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "websocket":
            await self._connection(scope, receive, send)
        else:
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"text/plain")],
                }
            )
            await send({"type": "http.response.body", "body": b"WebSocket sessions only\n"})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self._factory is not None:
                    self.node = await self._factory().start()
                    if self._setup is not None:
                        await self._setup(self.node)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._factory is not None and self.node is not None:
                    await self.node.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _connection(self, scope: Scope, receive: Receive, send: Send) -> None:
        node = self.node
        if (await receive())["type"] != "websocket.connect":
            return
        identity = True if self.authorize is None else await self.authorize(scope)
        if node is None or identity is None or identity is False:
            await _refuse(scope, send)
            return
        await send({"type": "websocket.accept"})
        socket = Socket(send)
        try:
            async with asyncio.timeout(self.hello_timeout):
                first = await self._text(receive, socket)
        except TimeoutError:
            await socket.close(codes.HELLO_TIMEOUT, f"no hello within {self.hello_timeout:g}s")
            return
        if first is None:
            return
        try:
            cls, hello = self.framing.hello(first, self.sessions)
        except Refused as refused:
            await socket.close(refused.code, refused.reason)
            await _drain(receive)
            return
        await self._run(node, cls, socket, receive, hello, None if identity is True else identity)

    async def _text(self, receive: Receive, socket: Socket) -> str | None:
        """The next text frame, or None once the client has gone (or was cut off)."""
        message = await receive()
        if message["type"] == "websocket.disconnect":
            socket.closed = True
            return None
        text = message.get("text")
        if text is None:
            data = message.get("bytes") or b""
            if len(data) > self.max_frame:
                await socket.close(codes.TOO_BIG, f"frames are at most {self.max_frame} bytes")
                return None
            try:
                text = data.decode()
            except UnicodeDecodeError:
                return "\x00binary"
        if len(text) > self.max_frame:
            await socket.close(codes.TOO_BIG, f"frames are at most {self.max_frame} bytes")
            return None
        return text

    async def _run(
        self,
        node: Node,
        cls: type[Session],
        socket: Socket,
        receive: Receive,
        hello: Any,
        identity: Any,
    ) -> None:
        name = f"{cls.type}-{secrets.token_hex(4)}"
        behaviour = cls()
        behaviour._link = socket
        behaviour.hello, behaviour.identity = hello, identity
        queries: set[str] = set()
        client = node.attach(f"~client-{name}", _to_client(socket, queries, self.framing))
        behaviour.client = client
        welcome = self.framing.welcome(cls, f"{node.id}:{name}")
        if welcome is not None:
            await socket.send(welcome)
        address = node.spawn(behaviour, name)
        stopped = node.watch(address)
        pending: asyncio.Queue[tuple[float, str]] = asyncio.Queue(
            self.bucket[0] + self.bucket[2] + 1
        )
        reader = asyncio.create_task(self._read(node, socket, receive, pending, name))
        handler = asyncio.create_task(
            _dispatch(node, address, client, socket, pending, queries, self.framing)
        )
        try:
            waits: list[asyncio.Future[Any]] = [reader, stopped]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if not stopped.done():
                await node.stop_actor(address)
            else:
                try:  # the session closed the socket: give the client a moment to agree
                    async with asyncio.timeout(2.0):
                        await reader
                except TimeoutError:
                    pass
        finally:
            for task in (reader, handler):
                task.cancel()
            await asyncio.gather(reader, handler, return_exceptions=True)
            node.detach(client)
            if address in node.actors():
                await node.stop_actor(address)

    async def _read(
        self,
        node: Node,
        socket: Socket,
        receive: Receive,
        pending: asyncio.Queue[tuple[float, str]],
        name: str,
    ) -> None:
        bucket = TokenBucket(*self.bucket)
        warned = -SLOWED_WARNING_EVERY
        while True:
            text = await self._text(receive, socket)
            if text is None:
                return
            delay = bucket.take()
            if delay is None:
                node.stats["sessions_cut"] += 1
                await socket.close(
                    codes.RATE_LIMITED, f"over {self.bucket[1]:g} frames/s for too long"
                )
                await _drain(receive)
                return
            if delay:
                node.stats["frames_slowed"] += 1
                # Said in the log: otherwise a client held to the rate looks merely slow.
                if time.monotonic() - warned >= SLOWED_WARNING_EVERY:
                    warned = time.monotonic()
                    log.warning(
                        "session %s sends over %g frames/s: its frames are slowed to that",
                        name,
                        self.bucket[1],
                    )
            await pending.put((time.monotonic() + delay, text))


async def _dispatch(
    node: Node,
    address: str,
    client: str,
    socket: Socket,
    pending: asyncio.Queue[tuple[float, str]],
    queries: set[str],
    framing: Framing,
) -> None:
    while True:
        ready_at, text = await pending.get()
        wait = ready_at - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            frame = framing.inbound(text)
            if isinstance(frame, Answer) and frame.conv not in queries:
                raise BadFrame(f"no query {frame.conv!r} is waiting")
            if not isinstance(frame, Answer) and frame.action in SYSTEM_ACTIONS:
                # A sentinel is the node's word that a watched actor ended; a client forging
                # one would make a session believe its peers crashed (issue 56.12).
                raise BadFrame(f"{frame.action!r} is a system action, not a client's")
        except BadFrame as error:
            node.stats["bad_frames"] += 1
            await socket.send(framing.failure(None, "BadFrame", str(error)[:500]))
            continue
        if isinstance(frame, Answer):
            queries.discard(frame.conv)
            envelope = Envelope(
                to=address,
                sender=client,
                conv=frame.conv,
                reply=True,
                body=frame.body,
                error=frame.error,
            )
        else:
            envelope = Envelope(
                to=address, action=frame.action, body=frame.body, sender=client, conv=frame.conv
            )
        await node._post(envelope)


def _to_client(
    socket: Socket, queries: set[str], framing: Framing
) -> Callable[[Envelope], Awaitable[None]]:
    async def deliver(envelope: Envelope) -> None:
        if envelope.action == "sentinel" and not envelope.conv:
            return
        if envelope.reply:
            if envelope.error is not None:
                kind, _, message = envelope.error.partition(": ")
                await socket.send(framing.failure(envelope.conv, kind, message))
            elif envelope.conv is not None:
                await socket.send(framing.reply(envelope.conv, envelope.body))
        elif envelope.conv is not None:
            queries.add(envelope.conv)
            await socket.send(framing.query(envelope.conv, envelope.action, envelope.body))
        else:
            await socket.send(framing.event(envelope.action, envelope.body))

    return deliver


async def _refuse(scope: Scope, send: Send) -> None:
    """Turn the handshake down: HTTP 401 where the server supports denial responses."""
    if "websocket.http.response" in (scope.get("extensions") or {}):
        body = b'{"status": 401, "title": "Unauthorized", "detail": "a valid token is needed"}'
        headers = [(b"content-type", b"application/problem+json")]
        await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": codes.UNAUTHORIZED})


async def _drain(receive: Receive) -> None:
    """Wait (briefly) for the client to acknowledge a close."""
    try:
        async with asyncio.timeout(2.0):
            while (await receive())["type"] != "websocket.disconnect":
                pass
    except TimeoutError:
        pass
