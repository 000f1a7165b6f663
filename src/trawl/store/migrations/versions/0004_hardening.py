"""hardening: a crawl attempt records why its outlinks were cut short; hosts count their
consecutive errors (host-level backoff)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("crawl_attempts") as batch:
        batch.add_column(sa.Column("outlinks_cut", sa.Text(), nullable=True))
    with op.batch_alter_table("crawl_hosts") as batch:
        batch.add_column(sa.Column("errors", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("errors_since", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("crawl_hosts") as batch:
        batch.drop_column("errors_since")
        batch.drop_column("errors")
    with op.batch_alter_table("crawl_attempts") as batch:
        batch.drop_column("outlinks_cut")
