"""Schema versions: ``trawl db upgrade`` applies the migrations; every command checks first.

Checking is a one-row read of ``alembic_version`` against :data:`HEAD`; alembic itself is
imported only to migrate (it costs a fifth of a second at start-up).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import exc

from trawl.model.errors import SchemaOutdated
from trawl.store import url as urls
from trawl.store.connection import Database
from trawl.store.sql import q

if TYPE_CHECKING:
    from alembic.config import Config

#: The newest revision in migrations/versions (a test keeps the two equal).
HEAD = "0009"

SCRIPTS = Path(__file__).with_name("migrations")
_CURRENT = q("SELECT version_num FROM alembic_version")
_LOCK = q("SELECT pg_advisory_xact_lock(:key)")
MIGRATION_LOCK = 0x7472_6177_6C00  # "trawl\0": one upgrade at a time per database


def _config(db: Database) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    config.attributes["connection"] = db.conn
    return config


def head() -> str:
    """The newest schema revision this trawl knows."""
    return HEAD


def current(db: Database) -> str | None:
    """The database's schema revision, ``None`` for a database trawl never touched."""
    try:
        with db.read():
            value = db.execute(_CURRENT).scalar()
    except exc.DBAPIError as error:
        if "alembic_version" in str(error.orig):
            return None
        raise
    return None if value is None else str(value)


def upgrade(db: Database, revision: str = "head") -> tuple[str | None, str]:
    """Apply migrations up to *revision*; returns (before, after)."""
    from alembic import command

    before = current(db)
    # One transaction for the whole upgrade: on PostgreSQL a failure leaves the schema as it
    # was, and the advisory lock (SQLite: the write lock) makes two upgraders take turns;
    # the second finds the work done.
    with db.write():
        if not db.is_sqlite:
            db.execute(_LOCK, {"key": MIGRATION_LOCK})
        command.upgrade(_config(db), revision)
    return before, current(db) or ""


def ensure(db: Database, *, auto: bool) -> None:
    """Upgrade an embedded (SQLite) database on first use; elsewhere demand ``db upgrade``."""
    revision = current(db)
    if revision == HEAD:
        return
    if auto:
        upgrade(db)
        return
    state = "has no trawl schema" if revision is None else f"is at schema {revision}"
    raise SchemaOutdated(
        f"the database at {urls.display(db.url)} {state}; this trawl needs {HEAD}: "
        "run `trawl db upgrade`"
    )
