"""byte order: every text column compares byte by byte on PostgreSQL (the "C" collation),
as SQLite's already do

A database made with a language's collation (en_US.UTF-8 is many servers' default) sorted
ids, urls, tags and task names by the locale's rules: another order than SQLite's, and
several times the cost of each comparison in every index and sort over them.

On a large database this rebuilds the indexes over text columns: the tables are locked
for as long as that takes. SQLite compares text byte by byte already; nothing changes there.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# trawl's tables at revision 0008: the migration touches no one else's in the same schema.
TABLES = (
    "aliases",
    "crawl_attempts",
    "crawl_hosts",
    "crawl_links",
    "crawl_pages",
    "crawl_payloads",
    "crawl_robots",
    "crawl_rulesets",
    "crawl_slots",
    "crawls",
    "failures",
    "feeders",
    "items",
    "jobs",
    "journal",
    "journal_consumers",
    "limit_state",
    "limits",
    "pipelines",
    "tags",
    "task_deps",
    "task_tags",
    "tasks",
    "tokens",
)

_TEXT_COLUMNS = sa.text(
    "SELECT table_name, column_name, collation_name FROM information_schema.columns"
    " WHERE table_schema = current_schema() AND data_type = 'text'"
    " AND table_name = ANY(:tables) ORDER BY table_name, ordinal_position"
)


def upgrade() -> None:
    _collate('"C"', lambda collation: collation != "C")


def downgrade() -> None:
    _collate('"default"', lambda collation: collation is not None)


def _collate(collation: str, needed: Callable[[str | None], bool]) -> None:
    """Give every text column of trawl's tables that *needed* says so *collation*, a table
    in one statement (its indexes rebuilt once)."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    by_table: dict[str, list[str]] = {}
    for table, column, current in bind.execute(_TEXT_COLUMNS, {"tables": list(TABLES)}):
        if needed(current):
            by_table.setdefault(table, []).append(column)
    for table, columns in by_table.items():
        changes = ", ".join(
            f'ALTER COLUMN "{column}" TYPE text COLLATE {collation}' for column in columns
        )
        op.execute(f'ALTER TABLE "{table}" {changes}')
