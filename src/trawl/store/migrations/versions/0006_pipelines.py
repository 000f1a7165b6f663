"""pipelines: remote workers' identities, hashed tokens, routing tags and session state;
tasks.pipeline_tag: the tag a remote pipeline needs to claim a task's jobs

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    flag = sa.Boolean(create_constraint=False)
    op.create_table(
        "pipelines",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("salt", sa.LargeBinary(), nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.Column("tags", sa.Text(), nullable=False),
        sa.Column("match_only", flag, nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("token_rotated_at", sa.Double(), nullable=False),
        sa.Column("draining", flag, nullable=False, server_default=sa.false()),
        sa.Column("connected_at", sa.Double(), nullable=True),
        sa.Column("server", sa.Text(), nullable=True),
        sa.Column("last_checkin", sa.Double(), nullable=True),
        sa.Column("client_version", sa.Text(), nullable=True),
        sa.Column("in_use", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("disk_free", sa.BigInteger(), nullable=True),
        sa.Column("disk_total", sa.BigInteger(), nullable=True),
        sa.Column("crawl", sa.BigInteger(), nullable=True),
        sa.Column("crawl_lock", sa.Text(), nullable=True),
        sa.Column("crawl_slots", sa.Integer(), nullable=True),
    )
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("pipeline_tag", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("pipeline_tag")
    op.drop_table("pipelines")
