"""trawl's tables that churn, vacuumed by trawl itself as they fill with dead rows.

Every fetch puts two rows into ``crawl_slots`` and takes them out again when its request is
done (a handful of live rows, as many as requests in flight), and moves its host's
``next_at`` in ``crawl_hosts`` (a row a host): thousands of dead rows a second on a busy
crawl. The politeness gate's reservation counts a crawl's slots by an index range scan,
which walks every dead entry left in the range, and releasing a slot looks its rows up by a
scan of the table's file. In a 20,000-page crawl on a server without autovacuum
(``pg_stat_statements``, docs/scaling.md) the reservation took 0.34 ms a fetch and the
release 0.12 ms; vacuumed as below, 0.19 and 0.03 ms. Autovacuum, where it runs, does not
keep up either: it looks at each database at most once a minute (``autovacuum_naptime``),
and a minute of a crawl at 400 pages a second leaves about 50,000 dead slot rows.

So the worker's and the API server's upkeep (every few seconds, as for the planner's
statistics: store/planner_stats.py) vacuum these tables once they hold more dead rows than
:data:`FLOOR` and than their live rows, on a connection of its own. Vacuumed that often they
stay small, so a VACUUM takes milliseconds. Other tables (jobs, rewritten twice a fetch, but
large) are left to autovacuum: there a VACUUM takes long and reclaims a small share.
"""

from __future__ import annotations

import logging

from trawl.store.connection import Database
from trawl.store.sql import q

log = logging.getLogger("trawl.store")

CHURN = ("crawl_hosts", "crawl_slots")  # rows rewritten or replaced per fetch
FLOOR = 1000  # dead rows before such a table is vacuumed (and more than its live rows)

# Only the owner of a table or of the database (or a superuser) may VACUUM it: any other
# user's VACUUM skips the table with a warning, and every look would find it crowded again.
# Such tables are left to autovacuum (docs/scaling.md). The dead-row counts come from the
# server's activity statistics, which a busy backend reports about once a second.
_CROWDED = q(
    "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid"
    " WHERE s.schemaname = current_schema() AND s.relname = ANY(CAST(:tables AS text[]))"
    " AND s.n_dead_tup >= greatest(CAST(:floor AS bigint), s.n_live_tup)"
    " AND (pg_has_role(c.relowner, 'USAGE') OR pg_has_role((SELECT datdba FROM pg_database"
    " WHERE datname = current_database()), 'USAGE'))"
    " ORDER BY s.relname"
)


def crowded(db: Database) -> list[str]:
    """The churning tables (:data:`CHURN`) full enough of dead rows to vacuum, that this
    database user may vacuum (PostgreSQL; [] on SQLite, which reuses a deleted row's
    space at once)."""
    if db.is_sqlite:
        return []
    params = {"tables": list(CHURN), "floor": FLOOR}
    return [str(name) for name in db.execute(_CROWDED, params).scalars()]


def vacuum(db: Database, tables: list[str]) -> None:
    """``VACUUM`` *tables* (churning tables of trawl's only), skipping any another session
    is vacuuming or analyzing right now rather than waiting for it. Outside a transaction:
    VACUUM cannot run inside one."""
    unknown = sorted(set(tables) - set(CHURN))
    if unknown:
        raise ValueError(f"not tables trawl vacuums: {', '.join(unknown)}")
    if db.is_sqlite or not tables:
        return
    if db.in_transaction:
        raise RuntimeError("VACUUM cannot run inside a transaction")
    names = ", ".join(f'"{name}"' for name in tables)
    db.execute(q(f"VACUUM (SKIP_LOCKED) {names}"))
    log.debug("vacuumed %s: they filled with dead rows", ", ".join(tables))
