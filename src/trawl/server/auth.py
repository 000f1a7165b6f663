"""Bearer tokens and scopes. Every route but ``/health`` names the scope it needs (``read``
by default; ``write`` to change things; ``admin`` for what affects many items at once or the
server's own records). A token's check costs a password hash, so a verified token is
remembered for a few seconds; a revoked one stops working within that time."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from trawl.model.records import TokenRow
from trawl.model.scopes import scope_allows
from trawl.server.stores import Stores

PUBLIC = "public"
CACHE_SECONDS = 10.0
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="trawl"'}


class Tokens:
    """Checks tokens against the database, remembering each answer for CACHE_SECONDS."""

    def __init__(self, stores: Stores, *, cache_seconds: float = CACHE_SECONDS) -> None:
        self.stores = stores
        self.cache_seconds = cache_seconds
        self._seen: dict[bytes, tuple[TokenRow | None, float]] = {}

    async def check(self, text: str) -> TokenRow | None:
        key = hashlib.sha256(text.encode()).digest()  # never keep the token itself around
        now = time.monotonic()
        seen = self._seen.get(key)
        if seen is not None and now - seen[1] < self.cache_seconds:
            return seen[0]
        row = await self.stores.run(lambda store: store.tokens.verify(text, store.clock()))
        if len(self._seen) > 10_000:  # bounded: a flood of made-up tokens cannot grow it
            self._seen.clear()
        self._seen[key] = (row, now)
        return row


async def guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Refuse a request without a token good enough for the route's scope."""
    need = handler.opt.get("scope", "read")
    if need == PUBLIC:
        return
    header = connection.headers.get("authorization", "")
    scheme, _, text = header.partition(" ")
    if scheme.lower() != "bearer" or not text.strip():
        raise NotAuthorizedException(
            "send 'Authorization: Bearer <token>' (make one with: trawl token create NAME)",
            headers=_CHALLENGE,
        )
    tokens: Tokens = connection.app.state.tokens
    row = await tokens.check(text.strip())
    if row is None:
        raise NotAuthorizedException(
            "the token is not known or was revoked (see: trawl token list)", headers=_CHALLENGE
        )
    if not scope_allows(row.scope, need):
        raise PermissionDeniedException(
            f"this needs a token with scope {need!r}; token {row.name!r} has {row.scope!r}"
        )
    connection.state.token = row


def require(connection: ASGIConnection[Any, Any, Any, Any], need: str, what: str) -> None:
    """Within a route: *what* (one form of the route's request) needs scope *need*."""
    row: TokenRow = connection.state.token
    if not scope_allows(row.scope, need):
        raise PermissionDeniedException(
            f"{what} needs a token with scope {need!r}; token {row.name!r} has {row.scope!r}"
        )
