"""freshness and scheduling: rate limits, dependencies, pauses, revisits, listers

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.add_column(sa.Column("first_seen", sa.Double(), nullable=True))
        batch.add_column(sa.Column("last_seen", sa.Double(), nullable=True))
        batch.add_column(sa.Column("last_update", sa.Double(), nullable=True))
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(
            sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("paused_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("max_failures", sa.Integer(), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("result_hash", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("revisit_offset", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("not_found", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("waiting", sa.Text(), nullable=True))
        batch.create_index(
            "jobs_waiting",
            ["waiting"],
            sqlite_where=sa.text("waiting IS NOT NULL"),
            postgresql_where=sa.text("waiting IS NOT NULL"),
        )
    with op.batch_alter_table("failures") as batch:
        batch.add_column(
            sa.Column("allowed", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "task_deps",
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("depends_on", sa.Text(), nullable=False),
        sa.Column("on_change", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["task"], ["tasks.name"], onupdate="CASCADE", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("task", "depends_on"),
    )
    op.create_index("task_deps_depends_on", "task_deps", ["depends_on", "task"])
    op.create_table(
        "limits",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("rate", sa.Double(), nullable=False),
        sa.Column("burst", sa.Integer(), nullable=False),
        sa.Column("tasks", sa.Text(), nullable=True),
        sa.Column("keyed", sa.Boolean(), nullable=False),
        sa.Column("registered_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "limit_state",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("tat", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name", "key"),
    )


def downgrade() -> None:
    op.drop_table("limit_state")
    op.drop_table("limits")
    op.drop_index("task_deps_depends_on", table_name="task_deps")
    op.drop_table("task_deps")
    with op.batch_alter_table("failures") as batch:
        batch.drop_column("allowed")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("jobs_waiting")
        for column in ("waiting", "not_found", "revisit_offset", "result_hash"):
            batch.drop_column(column)
    with op.batch_alter_table("tasks") as batch:
        for column in ("max_failures", "paused_reason", "paused"):
            batch.drop_column(column)
    with op.batch_alter_table("items") as batch:
        for column in ("last_update", "last_seen", "first_seen"):
            batch.drop_column(column)
