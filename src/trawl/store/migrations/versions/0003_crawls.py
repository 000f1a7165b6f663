"""crawls: crawls, rulesets, pages, links, attempts, payload digests, politeness, robots.txt

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _crawl_fk() -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["crawl_id"], ["crawls.id"], onupdate="CASCADE", ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "crawls",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("spec", sa.Text(), nullable=True),
        sa.Column("seeds", sa.Text(), nullable=False),
        sa.Column("depth_limit", sa.Integer(), nullable=True),
        sa.Column("niceness", sa.Integer(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("tag", sa.Text(), nullable=True),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("aborted", sa.Boolean(), nullable=False),
        sa.Column("ruleset", sa.Integer(), nullable=False),
        sa.Column("options", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("crawls_spec", "crawls", ["spec"])
    op.create_table(
        "crawl_rulesets",
        sa.Column("crawl_id", BigId, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("rules", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        _crawl_fk(),
        sa.PrimaryKeyConstraint("crawl_id", "version"),
    )
    op.create_table(
        "crawl_pages",
        sa.Column("crawl_id", BigId, nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("item_id", sa.Text(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("via", sa.Text(), nullable=True),
        sa.Column("skip", sa.Text(), nullable=True),
        sa.Column("found_at", sa.Double(), nullable=False),
        _crawl_fk(),
        sa.ForeignKeyConstraint(["item_id"], ["items.id"], onupdate="CASCADE", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("crawl_id", "url"),
    )
    op.create_index("crawl_pages_depth", "crawl_pages", ["crawl_id", "depth"])
    op.create_index("crawl_pages_item", "crawl_pages", ["item_id"], unique=True)
    op.create_table(
        "crawl_links",
        sa.Column("crawl_id", BigId, nullable=False),
        sa.Column("parent", sa.Text(), nullable=False),
        sa.Column("child", sa.Text(), nullable=False),
        sa.Column("hops", sa.Integer(), nullable=False),
        _crawl_fk(),
        sa.PrimaryKeyConstraint("crawl_id", "parent", "child"),
    )
    op.create_table(
        "crawl_attempts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("crawl_id", BigId, nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("ruleset", sa.Integer(), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("elapsed", sa.Double(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("content_type", sa.Text(), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("outlinks", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("digest", sa.Text(), nullable=True),
        sa.Column("warc_file", sa.Text(), nullable=True),
        sa.Column("warc_offset", sa.BigInteger(), nullable=True),
        sa.Column("warc_length", sa.BigInteger(), nullable=True),
        _crawl_fk(),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("crawl_attempts_url", "crawl_attempts", ["crawl_id", "url"])
    op.create_index("crawl_attempts_time", "crawl_attempts", ["crawl_id", "started_at"])
    op.create_table(
        "crawl_payloads",
        sa.Column("crawl_id", BigId, nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("date", sa.Text(), nullable=False),
        _crawl_fk(),
        sa.PrimaryKeyConstraint("crawl_id", "digest"),
    )
    op.create_table(
        "crawl_hosts",
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("next_at", sa.Double(), nullable=False),
        sa.Column("blocked_until", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("host"),
    )
    op.create_table(
        "crawl_slots",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("item_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("until", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("key", "item_id"),
    )
    op.create_table(
        "crawl_robots",
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("fetched_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("host"),
    )


def downgrade() -> None:
    for table in ("crawl_robots", "crawl_slots", "crawl_hosts", "crawl_payloads"):
        op.drop_table(table)
    op.drop_index("crawl_attempts_time", table_name="crawl_attempts")
    op.drop_index("crawl_attempts_url", table_name="crawl_attempts")
    op.drop_table("crawl_attempts")
    op.drop_table("crawl_links")
    op.drop_index("crawl_pages_item", table_name="crawl_pages")
    op.drop_index("crawl_pages_depth", table_name="crawl_pages")
    op.drop_table("crawl_pages")
    op.drop_table("crawl_rulesets")
    op.drop_index("crawls_spec", table_name="crawls")
    op.drop_table("crawls")
