"""API tokens: created with a random secret shown once, stored as a scrypt hash.

A token reads ``trawl_<id>_<secret>``. The id is not secret: it finds the row, so checking a
token costs one hash. scrypt (in the standard library, memory-hard) is the password hash;
a leaked ``tokens`` table does not give anyone a working token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from trawl.model.errors import Conflict
from trawl.model.ids import check_id
from trawl.model.records import TokenRow
from trawl.model.scopes import check_scope
from trawl.store.connection import Database
from trawl.store.sql import q

PREFIX = "trawl"
# scrypt's cost: 16 MiB and ~40 ms a check on one core; the server remembers a checked token
# for a few seconds, so this is paid once per token per server process, not per request.
_N, _R, _P = 2**14, 8, 1
USED_EVERY = 60.0  # last_used_at is written at most this often per token

_INSERT = q(
    "INSERT INTO tokens (id, name, scope, salt, hash, created_at)"
    " VALUES (:id, :name, :scope, :salt, :hash, :now)"
)
_BY_NAME = q("SELECT revoked_at FROM tokens WHERE name = :name")
_DROP_REVOKED = q("DELETE FROM tokens WHERE name = :name AND revoked_at IS NOT NULL")
_BY_ID = q(
    "SELECT name, scope, salt, hash, created_at, last_used_at, revoked_at FROM tokens"
    " WHERE id = :id"
)
_LIST = q("SELECT name, scope, created_at, last_used_at, revoked_at FROM tokens ORDER BY name")
_REVOKE = q(
    "UPDATE tokens SET revoked_at = :now WHERE name = :name AND revoked_at IS NULL RETURNING name"
)
_USED = q("UPDATE tokens SET last_used_at = :now WHERE id = :id")
_LIVE = q(
    "SELECT name, scope, hash, created_at, last_used_at FROM tokens"
    " WHERE id = :id AND revoked_at IS NULL"
)


def hash_secret(secret: str, salt: bytes) -> bytes:
    """The stored form of a token's secret (a pipeline's too)."""
    return hashlib.scrypt(secret.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=32)


def token_id(text: str) -> str | None:
    """The id part of a token's text (not secret: it names the row), if it has the shape."""
    parsed = _parse(text)
    return None if parsed is None else parsed[0]


def _parse(text: str) -> tuple[str, str] | None:
    prefix, _, rest = text.partition("_")
    token_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not token_id or not secret or len(text) > 200:
        return None
    return token_id, secret


class Tokens:
    """Create, list, revoke and check API tokens."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, name: str, scope: str, now: float) -> str:
        """A new token named *name*; the returned text is the only copy of its secret. The
        name of a revoked token may be used again; a live one's may not."""
        name = check_id(name, "token name")
        checked = check_scope(scope)
        token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        salt = secrets.token_bytes(16)
        digest = hash_secret(secret, salt)
        with self.db.write():
            found = self.db.execute(_BY_NAME, {"name": name}).first()
            if found is not None and found.revoked_at is None:
                raise Conflict(f"a token named {name!r} exists; revoke it first or pick another")
            self.db.execute(_DROP_REVOKED, {"name": name})
            params = {"id": token_id, "name": name, "scope": checked, "salt": salt}
            self.db.execute(_INSERT, {**params, "hash": digest, "now": now})
        return f"{PREFIX}_{token_id}_{secret}"

    def list(self) -> list[TokenRow]:
        with self.db.read():
            rows = self.db.execute(_LIST).all()
        return [
            TokenRow(
                name=r.name,
                scope=r.scope,
                created_at=r.created_at,
                last_used_at=r.last_used_at,
                revoked_at=r.revoked_at,
            )
            for r in rows
        ]

    def revoke(self, name: str, now: float) -> bool:
        """Whether a live token of that name was revoked."""
        with self.db.write():
            return self.db.execute(_REVOKE, {"name": name, "now": now}).first() is not None

    def verify(self, text: str, now: float) -> TokenRow | None:
        """The token's row if *text* is a live token, else None (never says which part was
        wrong)."""
        parsed = _parse(text)
        if parsed is None:
            return None
        token_id, secret = parsed
        with self.db.read():
            row = self.db.execute(_BY_ID, {"id": token_id}).first()
        if row is None or row.revoked_at is not None:
            return None
        if not hmac.compare_digest(hash_secret(secret, bytes(row.salt)), bytes(row.hash)):
            return None
        if row.last_used_at is None or now - row.last_used_at >= USED_EVERY:
            with self.db.write():
                self.db.execute(_USED, {"id": token_id, "now": now})
        return TokenRow(
            name=row.name,
            scope=row.scope,
            created_at=row.created_at,
            last_used_at=now,
            revoked_at=None,
        )

    def mac(self, token_id: str, message: bytes) -> tuple[TokenRow, bytes] | None:
        """An HMAC-SHA256 of *message* keyed by the live token's stored hash, with its row;
        None if no live token has that id. It signs dashboard sessions: only a process that
        reads the database can make one, and revoking the token ends every session it
        started. The key never leaves the store."""
        with self.db.read():
            row = self.db.execute(_LIVE, {"id": token_id}).first()
        if row is None:
            return None
        found = TokenRow(
            name=row.name,
            scope=row.scope,
            created_at=row.created_at,
            last_used_at=row.last_used_at,
            revoked_at=None,
        )
        return found, hmac.new(bytes(row.hash), message, hashlib.sha256).digest()
