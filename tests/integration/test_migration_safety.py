"""Migrations are all or nothing on PostgreSQL, and two processes upgrading one new
database take turns."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import pg
from trawl.store import migrate
from trawl.store.sql import q
from trawl.store.store import Store


@pytest.fixture
def empty_pg(pg_admin_url: str) -> Iterator[str]:
    name = f"trawl_empty_{os.getpid()}"
    url = pg.create_database(pg_admin_url, name)
    yield url
    pg.drop_database(pg_admin_url, name)


@pytest.mark.postgres
def test_a_failing_migration_leaves_the_schema_as_it_was(empty_pg: str) -> None:
    with Store(empty_pg) as store:
        with store.db.write():  # 0003 creates this table: the upgrade will trip over it
            store.db.execute(q("CREATE TABLE crawls (id integer)"))
        with pytest.raises(Exception, match="crawls"):
            migrate.upgrade(store.db)
        assert migrate.current(store.db) is None  # 0001 and 0002 were rolled back too
        tables = store.db.execute(
            q("SELECT count(*) FROM information_schema.tables WHERE table_name = 'jobs'")
        ).scalar()
        assert tables == 0


def _upgrade_together(url: str, count: int = 3) -> list[subprocess.CompletedProcess[str]]:
    trawl = [sys.executable, "-m", "trawl", "--db", url, "db", "upgrade"]
    started = [
        subprocess.Popen(trawl, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    done = []
    for proc in started:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_processes_upgrading_one_new_sqlite_file_take_turns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    for run in _upgrade_together(url):
        assert run.returncode == 0, run.stderr
    with Store(url) as store:
        assert migrate.current(store.db) == migrate.HEAD


@pytest.mark.postgres
def test_processes_upgrading_one_new_postgres_database_take_turns(empty_pg: str) -> None:
    for run in _upgrade_together(empty_pg):
        assert run.returncode == 0, run.stderr
    with Store(empty_pg) as store:
        assert migrate.current(store.db) == migrate.HEAD
