"""Named journal consumers: each keeps the seq of the last entry it acknowledged, so a
consumer that crashes resumes after its last acknowledgement (at-least-once delivery)."""

from __future__ import annotations

from typing import Literal

from trawl.model.errors import Conflict, InvalidInput, NotFound
from trawl.model.ids import check_id
from trawl.model.records import ConsumerRow
from trawl.store.connection import Database
from trawl.store.sql import q

_LAST_SEQ = q("SELECT COALESCE(MAX(seq), 0) FROM journal")
_ADD = q(
    "INSERT INTO journal_consumers (name, position, created_at) VALUES (:name, :position, :now)"
    " ON CONFLICT (name) DO NOTHING"
)
_POSITION = q("SELECT position FROM journal_consumers WHERE name = :name")
_POSITION_LOCKED = q("SELECT position FROM journal_consumers WHERE name = :name FOR UPDATE")
_ACK = q("UPDATE journal_consumers SET position = :seq, acked_at = :now WHERE name = :name")
_LIST = q(
    "SELECT c.name, c.position, c.created_at, c.acked_at,"
    " (SELECT COUNT(*) FROM journal j WHERE j.seq > c.position) AS lag"
    " FROM journal_consumers c ORDER BY c.name"
)
_DELETE = q("DELETE FROM journal_consumers WHERE name = :name RETURNING name")
_BEHIND = q("SELECT name, position FROM journal_consumers WHERE position < :seq ORDER BY name")
_LAST_BEFORE = q("SELECT MAX(seq) FROM journal WHERE at < :before")
_PRUNE = q("DELETE FROM journal WHERE seq <= :seq")

Start = Literal["beginning", "end"]


class Consumers:
    """Positions of named journal readers, and pruning that respects them."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def position(self, name: str, now: float, *, start: Start = "beginning") -> int:
        """The consumer's position, creating it the first time it is named: at the start of
        the journal (it reads everything still kept) or at its end (only what comes next)."""
        name = check_id(name, "consumer name")
        with self.db.write():
            # At the end: past every settled entry, so none committed later is skipped.
            begin = 0 if start == "beginning" else self.db.journal_horizon()
            self.db.execute(_ADD, {"name": name, "position": begin, "now": now})
            return int(self.db.execute(_POSITION, {"name": name}).scalar_one())

    def ack(self, name: str, seq: int, now: float) -> int:
        """Everything up to *seq* is processed. The position only moves forward (a late,
        out-of-order acknowledgement changes nothing); a seq past the journal's end is an
        error. Returns the position."""
        with self.db.write():
            locked = _POSITION if self.db.is_sqlite else _POSITION_LOCKED  # SQLite: one writer
            found = self.db.execute(locked, {"name": name}).first()
            if found is None:
                raise NotFound(f"no consumer is named {name!r}; read its entries first")
            last = int(self.db.execute(_LAST_SEQ).scalar_one())
            if seq < 0 or seq > last:
                raise InvalidInput(
                    f"seq {seq} is not in the journal (its last seq is {last}); acknowledge"
                    " the seq of the last entry you processed"
                )
            position = max(int(found.position), seq)
            self.db.execute(_ACK, {"name": name, "seq": position, "now": now})
            return position

    def list(self) -> list[ConsumerRow]:
        with self.db.read():
            rows = self.db.execute(_LIST).all()
        return [
            ConsumerRow(
                name=r.name,
                position=int(r.position),
                created_at=r.created_at,
                acked_at=r.acked_at,
                lag=int(r.lag),
            )
            for r in rows
        ]

    def delete(self, name: str) -> bool:
        with self.db.write():
            return self.db.execute(_DELETE, {"name": name}).first() is not None

    def prune(self, before: float, *, force: bool = False) -> int:
        """Delete journal entries written before *before*. Refused (nothing deleted) while a
        consumer has not acknowledged all of them, unless *force*. Returns how many went."""
        with self.db.write():
            last = self.db.execute(_LAST_BEFORE, {"before": before}).scalar()
            if last is None:
                return 0
            behind = self.db.execute(_BEHIND, {"seq": last}).all()
            if behind and not force:
                names = ", ".join(f"{r.name} (at {r.position})" for r in behind[:10])
                raise Conflict(
                    f"entries up to seq {last} are not acknowledged by {len(behind)}"
                    f" consumer(s): {names}; wait for them, delete them, or force"
                )
            return int(self.db.execute(_PRUNE, {"seq": last}).rowcount)
