"""SQLite's page cache is per connection: a worker's claim and commit connection gets a
large one, connections that only renew leases or count progress a small one, so a crawl
process does not grow by a large cache per connection as its database grows."""

from __future__ import annotations

import sqlalchemy as sa

from trawl.store.connection import CACHE_MIB
from trawl.store.store import SMALL_CACHE_MIB, Store

PRAGMA = sa.text("PRAGMA cache_size")


def test_each_connection_gets_the_cache_asked_for(sqlite_url: str) -> None:
    with Store(sqlite_url) as big, Store(sqlite_url, cache_mib=SMALL_CACHE_MIB) as small:
        assert big.db.execute(PRAGMA).scalar_one() == -CACHE_MIB * 1024
        assert small.db.execute(PRAGMA).scalar_one() == -SMALL_CACHE_MIB * 1024
