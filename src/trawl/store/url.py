"""Database URLs: ``sqlite:///path``, ``postgresql://...``; normalised for SQLAlchemy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import sqlalchemy as sa

from trawl.model.errors import InvalidInput

DEFAULT_URL = "sqlite:///trawl.db"
Dialect = Literal["sqlite", "postgresql"]


def default_url() -> str:
    """``TRAWL_DB`` from the environment, else the embedded default."""
    return os.environ.get("TRAWL_DB") or DEFAULT_URL


def parse(url: str) -> tuple[sa.URL, Dialect]:
    """Return the SQLAlchemy URL (with trawl's driver) and which backend it is."""
    try:
        parsed = sa.make_url(url)
    except Exception as exc:
        raise InvalidInput(
            f"cannot parse database URL {url!r}: use sqlite:///path/to/file.db "
            "or postgresql://user@host/dbname"
        ) from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.drivername != "sqlite":
            parsed = parsed.set(drivername="sqlite")
        return parsed, "sqlite"
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg"), "postgresql"
    raise InvalidInput(
        f"unsupported database {backend!r} in {url!r}: trawl runs on sqlite:/// and postgresql://"
    )


def display(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def collection_id(url: str) -> str:
    """The same string for every spelling of one database's URL on this machine."""
    parsed, dialect = parse(url)
    if dialect == "sqlite":
        database = parsed.database or ""
        where = str(Path(database).resolve()) if database not in ("", ":memory:") else database
        return f"sqlite:{where}"
    plain = sa.URL.create(
        "postgresql",
        username=parsed.username,
        host=parsed.host or "localhost",
        port=parsed.port or 5432,
        database=parsed.database,
    )
    return plain.render_as_string(hide_password=True)
