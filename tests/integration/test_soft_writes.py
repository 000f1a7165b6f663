"""A soft write (``Store.write(soft=True)``) commits without waiting for the WAL flush on
PostgreSQL, for that transaction only, and is an ordinary write on SQLite."""

from __future__ import annotations

import sqlalchemy as sa

from trawl.store.store import Store

SHOW = sa.text("SHOW synchronous_commit")


def test_a_soft_write_skips_the_flush_wait_for_its_own_transaction_only(pg_url: str) -> None:
    with Store(pg_url) as store:
        with store.write(soft=True):
            assert store.db.execute(SHOW).scalar_one() == "off"
            store.crawls.set_next("a.test", 5.0)  # no row yet: nothing to update, no error
        with store.write():
            assert store.db.execute(SHOW).scalar_one() == "on"
        with store.write(), store.write(soft=True):  # nested: a savepoint of a hard write
            assert store.db.execute(SHOW).scalar_one() == "on"


def test_a_soft_write_on_sqlite_commits_like_any_other(sqlite_url: str) -> None:
    with Store(sqlite_url) as store:
        with store.write(soft=True):
            store.crawls.block("a.test", 99.0)
        assert store.crawls.host("a.test")[1] == 99.0
