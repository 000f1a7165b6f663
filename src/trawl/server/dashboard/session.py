"""Dashboard sessions: a signed cookie, not a table.

Signing in with an API token gives a cookie ``<token id>.<expires>.<nonce>.<mac>``, the mac
an HMAC keyed by that token's stored hash (``Tokens.mac``): only a process that reads the
database can make one, so every server process of a fleet accepts it, it survives restarts,
and revoking the token ends every session it started (within the check cache). The cookie
never holds the token's secret. A session's CSRF token is derived from its mac, which only
the server and the HttpOnly cookie know, so a page on another site cannot compute it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from trawl.model.scopes import scope_allows
from trawl.server.auth import Tokens
from trawl.server.stores import Stores
from trawl.store.tokens import token_id

COOKIE = "trawl_session"
LIFETIME = 12 * 3600.0  # seconds a session lasts; then sign in again
CACHE_SECONDS = 10.0  # a checked cookie is remembered this long, as bearer tokens are
_VERSION = "v1"


@dataclass(frozen=True, kw_only=True, slots=True)
class Session:
    """Who is signed in: the token's name and scope, and the session's CSRF token."""

    name: str
    scope: str
    csrf: str
    expires_at: float

    def allows(self, need: str) -> bool:
        return scope_allows(self.scope, need)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _message(tid: str, expires: int, nonce: str) -> bytes:
    return f"{_VERSION}|session|{tid}|{expires}|{nonce}".encode()


def _csrf(mac: bytes) -> str:
    return _b64(hashlib.sha256(b"csrf|" + mac).digest())[:32]


class Sessions:
    """Starts sessions from tokens and checks session cookies, remembering answers briefly."""

    def __init__(
        self, stores: Stores, tokens: Tokens, *, cache_seconds: float = CACHE_SECONDS
    ) -> None:
        self.stores = stores
        self.tokens = tokens
        self.cache_seconds = cache_seconds
        self._seen: dict[bytes, tuple[Session | None, float]] = {}

    async def start(self, text: str, now: float) -> tuple[str, Session] | None:
        """A cookie value and its session for the API token *text*; None if it is not a
        live token."""
        tid = token_id(text)
        if tid is None or await self.tokens.check(text) is None:
            return None
        expires, nonce = int(now + LIFETIME), secrets.token_urlsafe(12)
        signed = await self.stores.run(lambda s: s.tokens.mac(tid, _message(tid, expires, nonce)))
        if signed is None:  # revoked between the two reads
            return None
        row, mac = signed
        cookie = f"{_VERSION}.{tid}.{expires}.{nonce}.{_b64(mac)}"
        return cookie, Session(name=row.name, scope=row.scope, csrf=_csrf(mac), expires_at=expires)

    async def read(self, cookie: str | None) -> Session | None:
        """The session *cookie* stands for, if it is genuine, unexpired and its token live."""
        if not cookie or len(cookie) > 300:
            return None
        key = hashlib.sha256(cookie.encode()).digest()
        now = time.monotonic()
        seen = self._seen.get(key)
        if seen is None or now - seen[1] >= self.cache_seconds:
            if len(self._seen) > 10_000:  # bounded: made-up cookies cannot grow it
                self._seen.clear()
            seen = (await self._check(cookie), now)
            self._seen[key] = seen
        session = seen[0]
        if session is not None and session.expires_at <= time.time():
            return None
        return session

    async def _check(self, cookie: str) -> Session | None:
        parts = cookie.split(".")
        if len(parts) != 5 or parts[0] != _VERSION or not parts[2].isdigit():
            return None
        _, tid, expires_text, nonce, mac_text = parts
        expires = int(expires_text)
        if expires <= time.time():
            return None
        message = _message(tid, expires, nonce)
        signed = await self.stores.run(lambda s: s.tokens.mac(tid, message))
        if signed is None:
            return None
        row, mac = signed
        if not hmac.compare_digest(_b64(mac), mac_text):
            return None
        return Session(name=row.name, scope=row.scope, csrf=_csrf(mac), expires_at=expires)
