"""Remote pipelines: an id, a token stored as a scrypt hash, routing tags, slots, and what
the pipeline's session last reported (check-in time, client version, slots in use, disk).

A pipeline's token is a random secret with no structure: the pipeline id comes with it
(``--pipeline ID --token TOKEN``), so checking one costs one hash.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Sequence
from typing import Any

from trawl.model.errors import Conflict, InvalidInput, NotFound
from trawl.model.ids import check_pipeline_id, check_tag
from trawl.model.records import PipelineRow
from trawl.store import codec
from trawl.store.connection import Database
from trawl.store.sql import q
from trawl.store.tokens import hash_secret

MAX_SLOTS = 10_000
# A session pings every 15 s; two missed pings and its row no longer counts as connected
# (a server that died cannot say its sessions ended).
STALE_AFTER = 45.0

_COLUMNS = (
    "id, tags, match_only, slots, created_at, token_rotated_at, draining, connected_at,"
    " server, last_checkin, client_version, in_use, disk_free, disk_total, crawl, crawl_lock,"
    " crawl_slots"
)
_INSERT = q(
    "INSERT INTO pipelines (id, salt, hash, tags, match_only, slots, created_at,"
    " token_rotated_at) VALUES (:id, :salt, :hash, :tags, :match_only, :slots, :now, :now)"
    " ON CONFLICT (id) DO NOTHING RETURNING id"
)
_LIST = q(f"SELECT {_COLUMNS} FROM pipelines WHERE id > :after ORDER BY id LIMIT :limit")
_GET = q(f"SELECT {_COLUMNS} FROM pipelines WHERE id = :id")
_SECRET = q("SELECT salt, hash FROM pipelines WHERE id = :id")
_ROTATE = q(
    "UPDATE pipelines SET salt = :salt, hash = :hash, token_rotated_at = :now WHERE id = :id"
    " RETURNING id"
)
_DELETE = q("DELETE FROM pipelines WHERE id = :id RETURNING id")
_UPDATE = q(
    "UPDATE pipelines SET tags = :tags, match_only = :match_only, slots = :slots,"
    " draining = :draining WHERE id = :id"
)
_CONNECTED = q(
    "UPDATE pipelines SET connected_at = :now, server = :server, last_checkin = :now,"
    " client_version = :version, in_use = 0 WHERE id = :id"
)
_DISCONNECTED = q(
    "UPDATE pipelines SET connected_at = NULL, server = NULL, in_use = 0"
    " WHERE id = :id AND server = :server"
)
_PIN = q(
    "UPDATE pipelines SET crawl = :crawl, crawl_lock = :lock, crawl_slots = :slots"
    " WHERE id = :id RETURNING id"
)
_CRAWL_EXISTS = q("SELECT 1 FROM crawls WHERE id = :crawl")
LOCKS = ("finished", "forever")
_CHECKIN = q(
    "UPDATE pipelines SET last_checkin = :now, in_use = :in_use, disk_free = :free,"
    " disk_total = :total WHERE id = :id"
)


def _row(r: Any) -> PipelineRow:
    return PipelineRow(
        id=r.id,
        tags=tuple(codec.loads(r.tags)),
        match_only=bool(r.match_only),
        slots=r.slots,
        created_at=r.created_at,
        token_rotated_at=r.token_rotated_at,
        draining=bool(r.draining),
        connected_at=r.connected_at,
        server=r.server,
        last_checkin=r.last_checkin,
        client_version=r.client_version,
        in_use=r.in_use,
        disk_free=r.disk_free,
        disk_total=r.disk_total,
        crawl=r.crawl,
        crawl_lock=r.crawl_lock,
        crawl_slots=r.crawl_slots,
    )


def is_connected(row: PipelineRow, now: float) -> bool:
    """Whether *row*'s session is open, as far as the database can tell."""
    return row.connected_at is not None and now - (row.last_checkin or 0.0) < STALE_AFTER


def check_slots(slots: int) -> int:
    if not 1 <= slots <= MAX_SLOTS:
        raise InvalidInput(f"slots must be between 1 and {MAX_SLOTS}, got {slots}")
    return slots


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted({check_tag(t) for t in tags}))


class Pipelines:
    """Create, list, change, rotate, delete and check remote pipelines."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self, pipeline_id: str, *, tags: Sequence[str], match_only: bool, slots: int, now: float
    ) -> str:
        """A new pipeline; the returned token is the only copy of its secret."""
        params = {
            "id": check_pipeline_id(pipeline_id),
            "tags": codec.dumps(list(check_tags(tags))),
            "match_only": match_only,
            "slots": check_slots(slots),
            "now": now,
        }
        token, salt = secrets.token_urlsafe(32), secrets.token_bytes(16)
        with self.db.write():
            created = self.db.execute(
                _INSERT, {**params, "salt": salt, "hash": hash_secret(token, salt)}
            ).first()
        if created is None:
            raise Conflict(f"a pipeline named {pipeline_id!r} exists (see: trawl pipeline list)")
        return token

    def list(self, *, after: str = "", limit: int = 10_000) -> list[PipelineRow]:
        """Pipelines in id order, after *after*."""
        with self.db.read():
            return [_row(r) for r in self.db.execute(_LIST, {"after": after, "limit": limit})]

    def get(self, pipeline_id: str) -> PipelineRow | None:
        with self.db.read():
            found = self.db.execute(_GET, {"id": pipeline_id}).first()
        return None if found is None else _row(found)

    def require(self, pipeline_id: str) -> PipelineRow:
        found = self.get(pipeline_id)
        if found is None:
            raise NotFound(f"no pipeline is named {pipeline_id!r} (see: trawl pipeline list)")
        return found

    def update(
        self,
        pipeline_id: str,
        *,
        add_tags: Sequence[str] = (),
        remove_tags: Sequence[str] = (),
        match_only: bool | None = None,
        slots: int | None = None,
        draining: bool | None = None,
    ) -> PipelineRow:
        """Change a pipeline's routing or slots; the next claim of its session obeys."""
        with self.db.write():
            found = self.db.execute(_GET, {"id": pipeline_id}).first()
            if found is None:
                raise NotFound(f"no pipeline is named {pipeline_id!r} (see: trawl pipeline list)")
            old = _row(found)
            tags = (set(old.tags) | set(check_tags(add_tags))) - set(remove_tags)
            params = {
                "id": pipeline_id,
                "tags": codec.dumps(sorted(tags)),
                "match_only": old.match_only if match_only is None else match_only,
                "slots": old.slots if slots is None else check_slots(slots),
                "draining": old.draining if draining is None else draining,
            }
            self.db.execute(_UPDATE, params)
            return _row(self.db.execute(_GET, {"id": pipeline_id}).one())

    def rotate(self, pipeline_id: str, now: float) -> str:
        """A new token for the pipeline; the old one stops working (sessions already open
        are told and closed by the server that holds them)."""
        token, salt = secrets.token_urlsafe(32), secrets.token_bytes(16)
        params = {"id": pipeline_id, "salt": salt, "hash": hash_secret(token, salt), "now": now}
        with self.db.write():
            if self.db.execute(_ROTATE, params).first() is None:
                raise NotFound(f"no pipeline is named {pipeline_id!r} (see: trawl pipeline list)")
        return token

    def delete(self, pipeline_id: str) -> bool:
        with self.db.write():
            return self.db.execute(_DELETE, {"id": pipeline_id}).first() is not None

    def verify(self, pipeline_id: str, token: str) -> PipelineRow | None:
        """The pipeline if *token* is its current token, else None (never says which part
        was wrong)."""
        if len(token) > 200:
            return None
        with self.db.read():
            found = self.db.execute(_SECRET, {"id": pipeline_id}).first()
        if found is None:
            return None
        if not hmac.compare_digest(hash_secret(token, bytes(found.salt)), bytes(found.hash)):
            return None
        return self.get(pipeline_id)

    def connected(self, pipeline_id: str, server: str, version: str, now: float) -> None:
        with self.db.write():
            self.db.execute(
                _CONNECTED, {"id": pipeline_id, "server": server, "version": version, "now": now}
            )

    def disconnected(self, pipeline_id: str, server: str) -> None:
        """The session on *server* ended (a newer session elsewhere is left alone)."""
        with self.db.write():
            self.db.execute(_DISCONNECTED, {"id": pipeline_id, "server": server})

    def checkin(
        self, pipeline_id: str, now: float, *, in_use: int, free: int | None, total: int | None
    ) -> None:
        params = {"id": pipeline_id, "now": now, "in_use": in_use, "free": free, "total": total}
        with self.db.write():
            self.db.execute(_CHECKIN, params)

    def pin(
        self,
        pipeline_id: str,
        crawl_id: int | None,
        lock: str = "finished",
        slots: int | None = None,
    ) -> PipelineRow:
        """Hold *slots* of the pipeline's slots (all of them: ``None``) to *crawl_id*'s
        pages until it finishes (*lock* ``finished``) or until unpinned (``forever``);
        ``None`` unpins. Pinned slots wait for that crawl even when it has nothing due."""
        if lock not in LOCKS:
            raise InvalidInput(
                f"a pin lasts until the crawl is 'finished' or 'forever', not {lock!r}"
            )
        if slots is not None:
            check_slots(slots)
        with self.db.write():
            if (
                crawl_id is not None
                and self.db.execute(_CRAWL_EXISTS, {"crawl": crawl_id}).first() is None
            ):
                raise NotFound(f"no crawl has the id {crawl_id}")
            pinned = crawl_id is not None
            params = {
                "id": pipeline_id,
                "crawl": crawl_id,
                "lock": lock if pinned else None,
                "slots": slots if pinned else None,
            }
            if self.db.execute(_PIN, params).first() is None:
                raise NotFound(f"no pipeline is named {pipeline_id!r} (see: trawl pipeline list)")
            return _row(self.db.execute(_GET, {"id": pipeline_id}).one())
