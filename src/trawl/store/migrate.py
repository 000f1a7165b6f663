"""Schema versions: ``trawl db upgrade`` applies the migrations; workers check first."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from trawl.model.errors import SchemaOutdated
from trawl.store import url as urls
from trawl.store.database import Database

_SCRIPTS = Path(__file__).with_name("migrations")


def _config(db: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = db.conn
    return config


def head() -> str:
    """The newest schema revision this trawl knows."""
    script = ScriptDirectory(str(_SCRIPTS))
    revision = script.get_current_head()
    assert revision is not None
    return revision


def current(db: Database) -> str | None:
    return MigrationContext.configure(db.conn).get_current_revision()


def upgrade(db: Database, revision: str = "head") -> tuple[str | None, str]:
    """Apply migrations up to *revision*; returns (before, after)."""
    before = current(db)
    command.upgrade(_config(db), revision)
    return before, current(db) or ""


def ensure(db: Database, *, auto: bool) -> None:
    """Upgrade an embedded (SQLite) database on first use; elsewhere demand ``db upgrade``."""
    revision = current(db)
    if revision == head():
        return
    if auto:
        upgrade(db)
        return
    state = "has no trawl schema" if revision is None else f"is at schema {revision}"
    raise SchemaOutdated(
        f"the database at {urls.display(db.url)} {state}; this trawl needs {head()}: "
        "run `trawl db upgrade`"
    )
