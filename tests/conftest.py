"""Fixtures shared by every tier: databases on both backends.

``db_url`` is parametrised over SQLite and PostgreSQL, so a test that takes it is a
storage-contract test run on both. PostgreSQL databases are copies of a migrated template
made once per session (CREATE DATABASE ... TEMPLATE), so each test starts empty and fast.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import pg
from trawl.store import migrate
from trawl.store.store import Store

_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A maintenance URL on a PostgreSQL server for this session."""
    with pg.server() as url:
        yield url


@pytest.fixture(scope="session")
def pg_template(pg_admin_url: str) -> Iterator[str]:
    """The name of a migrated template database."""
    name = f"trawl_tpl_{os.getpid()}"
    url = pg.create_database(pg_admin_url, name)
    with Store(url) as store:
        migrate.upgrade(store.db)
    yield name
    pg.drop_database(pg_admin_url, name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    with Store(f"sqlite:///{path}") as store:
        migrate.upgrade(store.db)
    return path


@pytest.fixture
def pg_url(pg_admin_url: str, pg_template: str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test."""
    name = f"trawl_test_{os.getpid()}_{next(_counter)}"
    url = pg.create_database(pg_admin_url, name, template=pg_template)
    yield url
    pg.drop_database(pg_admin_url, name)


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """A fresh, migrated SQLite database for one test."""
    path = tmp_path / "trawl.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh, migrated database on each backend in turn."""
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(fixture)
    return url
