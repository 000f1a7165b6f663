"""Migrating an empty database yields exactly the declared schema, on both backends."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tests.support import pg
from trawl.model.errors import SchemaOutdated
from trawl.store import migrate, schema
from trawl.store.store import Store

BareDatabase = Callable[[str], str]


@pytest.fixture
def bare_pg(pg_admin_url: str) -> Iterator[BareDatabase]:
    """Makes PostgreSQL databases with nothing in them (not copies of the migrated template)."""
    names: list[str] = []

    def make(suffix: str) -> str:
        names.append(f"trawl_bare_{os.getpid()}_{suffix}")
        return pg.create_database(pg_admin_url, names[-1])

    yield make
    for name in names:
        pg.drop_database(pg_admin_url, name)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def bare(request: pytest.FixtureRequest, tmp_path: Path) -> BareDatabase:
    if request.param == "sqlite":
        return lambda suffix: f"sqlite:///{tmp_path / suffix}.db"
    make: BareDatabase = request.getfixturevalue("bare_pg")
    return make


_INDEXES_SQLITE = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
_INDEXES_POSTGRES = (
    "SELECT indexname, indexdef FROM pg_indexes"
    " WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
)


def index_definitions(store: Store) -> set[tuple[str, str]]:
    query = _INDEXES_SQLITE if store.is_sqlite else _INDEXES_POSTGRES
    return {(name, sql) for name, sql in store.db.execute(sa.text(query))}


# SQLAlchemy cannot reflect SQLite's expression indexes (the visit policies'); the test of
# partial indexes below compares their definitions exactly instead.
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
@pytest.mark.filterwarnings(
    "ignore:autogenerate skipping metadata-specified expression-based index"
)
def test_upgrading_an_empty_database_gives_the_declared_schema(bare: BareDatabase) -> None:
    with Store(bare("migrated")) as store:
        assert migrate.upgrade(store.db) == (None, migrate.head())
        differences = compare_metadata(MigrationContext.configure(store.db.conn), schema.metadata)
    assert differences == []


def test_partial_indexes_match_the_declared_ones_exactly(bare: BareDatabase) -> None:
    """compare_metadata does not look at index predicates; the claim depends on them."""
    with Store(bare("migrated")) as migrated, Store(bare("declared")) as declared:
        migrate.upgrade(migrated.db)
        with declared.db.write() as conn:
            schema.metadata.create_all(conn)
        assert index_definitions(migrated) == index_definitions(declared)
        assert any("WHERE ready" in sql for _, sql in index_definitions(migrated))


def test_upgrading_twice_changes_nothing(bare: BareDatabase) -> None:
    with Store(bare("twice")) as store:
        migrate.upgrade(store.db)
        assert migrate.upgrade(store.db) == (migrate.head(), migrate.head())


@pytest.mark.postgres
def test_a_worker_on_an_empty_postgres_database_is_told_to_run_db_upgrade(
    bare_pg: BareDatabase,
) -> None:
    with Store(bare_pg("empty")) as store:
        with pytest.raises(SchemaOutdated, match=r"has no trawl schema.*run `trawl db upgrade`"):
            migrate.ensure(store.db, auto=False)
        assert migrate.current(store.db) is None  # nothing was created behind the user's back


def test_an_embedded_database_is_upgraded_on_first_use(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'new.db'}") as store:
        migrate.ensure(store.db, auto=True)
        assert migrate.current(store.db) == migrate.head()
        assert store.status() == []
