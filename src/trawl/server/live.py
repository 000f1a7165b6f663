"""The live layer in the API's application: WebSocket sessions at ``/live``.

The session endpoint is :class:`trawl.live.LiveApp` mounted as a plain ASGI app. A browser
cannot set headers on a WebSocket, so besides ``Authorization: Bearer`` the token may come
as ``?token=``; either way it needs the ``read`` scope. The node is this server process's:
on its own unless an AMQP URL joins it to a cluster, with shared state in memory unless a
Redis URL is given.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import parse_qs

from litestar import asgi
from litestar.types import Receive, Scope, Send

from trawl.live import AmqpTransport, LiveApp, Node, RedisMap, Session
from trawl.model import wire
from trawl.model.errors import InvalidInput
from trawl.model.scopes import scope_allows
from trawl.server.auth import PUBLIC, Tokens
from trawl.server.pipelines.customs import CUSTOM_EFFECTS
from trawl.server.pipelines.endpoint import endpoint
from trawl.server.pipelines.session import WATCH_EVERY
from trawl.server.stores import Stores

PATH = "/live"


class Live:
    """This process's node and its session endpoint, started with the application."""

    def __init__(
        self,
        sessions: Iterable[type[Session]] = (),
        *,
        amqp: str | None = None,
        redis: str | None = None,
        cluster: str = "default",
    ) -> None:
        self.amqp, self.redis, self.cluster = amqp, redis, cluster
        self.node: Node | None = None
        self.tokens: Tokens | None = None
        self.app = LiveApp(self._node, list(sessions), authorize=self._authorize)
        self.pipelines: LiveApp | None = None  # /ws/pipeline, once the server has its stores

    def serve_pipelines(self, stores: Stores, *, watch_every: float = WATCH_EVERY) -> None:
        self.pipelines = endpoint(stores, CUSTOM_EFFECTS, watch_every=watch_every)

    def _node(self) -> Node:
        transport = AmqpTransport(self.amqp, self.cluster) if self.amqp else None
        kv = RedisMap(self.redis) if self.redis else None
        return Node(transport=transport, kv=kv)

    async def start(self) -> None:
        self.node = await self._node().start()
        self.app.node = self.node
        if self.pipelines is not None:
            self.pipelines.node = self.node

    async def stop(self) -> None:
        if self.node is not None:
            await self.node.stop()
            await self.node.kv.close()
            self.node = None

    async def _authorize(self, scope: dict[str, Any]) -> bool:
        if self.tokens is None:
            return False
        headers = dict(scope.get("headers") or [])
        scheme, _, text = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            text = (query.get("token") or [""])[0]
        if not text.strip():
            return False
        row = await self.tokens.check(text.strip())
        return row is not None and scope_allows(row.scope, "read")

    def routes(self) -> list[Any]:
        """The session endpoints: /live, and /ws/pipeline once pipelines are served."""
        served = [(PATH, self.app)]
        if self.pipelines is not None:
            served.append((wire.PATH, self.pipelines))
        return [_mount(path, app) for path, app in served]


def _mount(path: str, app: LiveApp) -> Any:
    @asgi(path, is_mount=True, copy_scope=True, opt={"scope": PUBLIC}, include_in_schema=False)
    async def mounted(scope: Scope, receive: Receive, send: Send) -> None:
        await app(scope, receive, send)  # type: ignore[arg-type]

    return mounted


def load_sessions(specs: Sequence[str]) -> list[type[Session]]:
    """``module:Class`` names of Session subclasses, imported."""
    found: list[type[Session]] = []
    for spec in specs:
        module_name, sep, name = spec.partition(":")
        if not sep or not module_name or not name:
            raise InvalidInput(f"session {spec!r}: expected module:Class")
        try:
            value = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError) as error:
            raise InvalidInput(f"session {spec!r}: {error}") from None
        if not (isinstance(value, type) and issubclass(value, Session)):
            raise InvalidInput(f"session {spec!r} is not a trawl.live.Session subclass")
        found.append(value)
    return found
