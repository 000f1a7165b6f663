"""PostgreSQL's planner statistics, kept up as trawl's tables grow.

A prepared statement's plan is made once and kept until the tables' statistics change.
psycopg prepares a statement on its fifth use, which in a new crawl is a second or two in,
while ``tags`` or ``crawl_pages`` still hold a few hundred rows: a sequential scan is then
the cheapest plan, and it stays the plan as the table grows. Seen in a 20,000-page crawl on
a server without autovacuum: the insert of each commit's new jobs read every ``tags`` row
(3.6 ms a commit at 25,000 pages, growing with the table). Autovacuum, where it runs,
analyzes a table only when a tenth of it changed and at most once a minute per database,
so a young crawl's plans are made blind there too.

So each worker looks every few seconds (one read of ``pg_stat_user_tables``) for tables
with more rows written since their last ``ANALYZE`` than :data:`GROWTH` times the rows
they had then, and at least :data:`FLOOR`, and analyzes those: a growing table about each
time it doubles, a handful of times in its life, each a bounded sample (300 x
``default_statistics_target`` rows).
``ANALYZE`` also drops the cached plans that use the table, so the next use plans afresh.
SQLite keeps no plans across statements and has no statistics unless asked: nothing to do.
"""

from __future__ import annotations

import logging

from trawl.store.connection import Database
from trawl.store.schema import metadata
from trawl.store.sql import q

log = logging.getLogger("trawl.store")

EVERY = 5.0  # seconds between a process's looks (a worker's, the API server's)
FLOOR = 1000  # rows written since a table's last ANALYZE before it is analyzed again
GROWTH = 1.0  # ... and at least this many times its rows then: analyzed as it doubles

TABLES = tuple(sorted(table.name for table in metadata.sorted_tables))

# Rows written (inserted, updated, deleted), not live rows gained: a small table that
# churns (crawl_slots, a row in and out per fetch) must be analyzed too. Where nothing
# vacuums it its file fills with dead rows, and a table never analyzed is estimated from
# its file's size: taken for thousands of rows, crawl_slots turned the politeness gate's
# count from an index lookup into a join over all running jobs (0.4 -> 2.1 ms a fetch).
# reltuples is -1 for a table never analyzed (or vacuumed): it counts as empty. The
# figures come from the server's activity statistics, which a busy backend reports every
# few seconds: they lag a little.
#
# Only the owner of a table or of the database (or a member of that role, or a superuser)
# may ANALYZE it: for any other user the server skips the table with a warning, its
# statistics stay behind, and every look would find it stale again. Such tables are left
# to autovacuum (docs/scaling.md says so).
_STALE = q(
    "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid"
    " WHERE s.schemaname = current_schema() AND s.relname = ANY(CAST(:tables AS text[]))"
    " AND s.n_mod_since_analyze >= greatest(CAST(:floor AS float8),"
    " CAST(:growth AS float8) * greatest(c.reltuples, 0))"
    " AND (pg_has_role(c.relowner, 'USAGE') OR pg_has_role((SELECT datdba FROM pg_database"
    " WHERE datname = current_database()), 'USAGE'))"
    " ORDER BY s.relname"
)


def stale(db: Database) -> list[str]:
    """trawl's tables whose statistics are behind their size and that this database user
    may analyze (PostgreSQL; [] on SQLite)."""
    if db.is_sqlite:
        return []
    params = {"tables": list(TABLES), "floor": FLOOR, "growth": GROWTH}
    return [str(name) for name in db.execute(_STALE, params).scalars()]


def analyze(db: Database, tables: list[str]) -> None:
    """``ANALYZE`` *tables* (names from trawl's schema only), skipping any another session
    is analyzing or vacuuming right now rather than waiting for it."""
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise ValueError(f"not trawl tables: {', '.join(unknown)}")
    if db.is_sqlite or not tables:
        return
    names = ", ".join(f'"{name}"' for name in tables)
    db.execute(q(f"ANALYZE (SKIP_LOCKED) {names}"))
    log.debug("analyzed %s: they grew since their last statistics", ", ".join(tables))
