"""Text compares byte by byte on both backends, whatever collation the PostgreSQL database
was made with (migration 0009, ``schema.Text``).

A database made with a language's collation (en-US here, by ICU, so the test needs no
operating-system locale) sorts "a" before "B"; SQLite and trawl's columns sort "B" first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from alembic import command

from tests.support import pg
from trawl.model.records import NewItem
from trawl.store import migrate, schema
from trawl.store.store import Store

IDS = ["b", "A", "B", "a", "é", "z", "Z"]
BYTE_ORDER = sorted(IDS)  # Python compares code points: UTF-8's byte order
_LANGUAGE = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
_NOT_C = (
    "SELECT table_name || '.' || column_name FROM information_schema.columns"
    " WHERE table_schema = current_schema() AND data_type = 'text'"
    " AND table_name <> 'alembic_version' AND collation_name IS DISTINCT FROM 'C'"
)


@pytest.fixture
def language_db(pg_admin_url: str) -> Iterator[str]:
    """An empty PostgreSQL database whose own collation is en-US (ICU)."""
    name = f"trawl_language_{os.getpid()}"
    try:
        url = pg.create_database(pg_admin_url, name, options=_LANGUAGE)
    # A server built without ICU, or older than 15 (no LOCALE_PROVIDER): the tests need
    # some database whose own order is a language's, and this is the portable way to one.
    except (psycopg.errors.FeatureNotSupported, psycopg.errors.SyntaxError) as error:
        pytest.skip(f"this PostgreSQL cannot make an ICU en-US database (15+ with ICU): {error}")
    yield url
    pg.drop_database(pg_admin_url, name)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_collation_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database: SQLite, or PostgreSQL made with a language's collation."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'trawl.db'}"
    else:
        url = request.getfixturevalue("language_db")
    with Store(url) as store:
        migrate.upgrade(store.db)
    return url


@pytest.mark.postgres
def test_the_language_database_sorts_by_the_language(language_db: str) -> None:
    """The premise of the other tests: this database's own order is not byte order."""
    with psycopg.connect(language_db) as conn:
        rows = conn.execute("SELECT x FROM unnest(%s::text[]) AS x ORDER BY x", [IDS])
        assert [x for (x,) in rows] != BYTE_ORDER


def test_items_list_in_byte_order(any_collation_url: str) -> None:
    with Store(any_collation_url) as store:
        store.add_items([NewItem(id=i, tags=(("t", None),)) for i in IDS])
        assert store.tagged("t") == BYTE_ORDER
        # Paging by "after the last id seen" takes up exactly where the last page ended.
        first = store.tagged("t", limit=3)
        assert first + store.tagged("t", after=first[-1]) == BYTE_ORDER


def test_a_file_of_items_is_staged_and_written_in_byte_order(any_collation_url: str) -> None:
    with Store(any_collation_url) as store:
        with store.stage_items() as stage:
            stage.add(NewItem(id=i, tags=(("t", None),)) for i in [*IDS, "a"])  # "a" twice
            assert sum(written.made for written in stage.write(3)) == len(IDS)
        assert store.tagged("t") == BYTE_ORDER


@pytest.mark.postgres
def test_every_text_column_compares_byte_by_byte(language_db: str, pg_admin_url: str) -> None:
    with Store(language_db) as store:
        migrate.upgrade(store.db)
        assert list(store.db.execute(sa.text(_NOT_C))) == []
    declared = f"trawl_declared_{os.getpid()}"
    url = pg.create_database(pg_admin_url, declared, options=_LANGUAGE)
    try:
        with Store(url) as store, store.db.write() as conn:
            schema.metadata.create_all(conn)
            assert list(conn.execute(sa.text(_NOT_C))) == []
    finally:
        pg.drop_database(pg_admin_url, declared)


@pytest.mark.postgres
def test_the_migration_changes_an_existing_database_and_back(language_db: str) -> None:
    with Store(language_db) as store:
        migrate.upgrade(store.db, "0008")
        store.add_items([NewItem(id=i, tags=(("t", None),)) for i in IDS])
        assert store.tagged("t") != BYTE_ORDER  # the database's own order, before 0009
        migrate.upgrade(store.db)
        assert store.tagged("t") == BYTE_ORDER
        assert list(store.db.execute(sa.text(_NOT_C))) == []
        with store.db.write():
            command.downgrade(migrate._config(store.db), "0008")
        assert len(list(store.db.execute(sa.text(_NOT_C)))) > 50
        assert store.tagged("t") != BYTE_ORDER
