"""executors: tasks say who runs them (trawl or Celery) and on which queue; jobs record
their hand-off to an external executor and the source's last activity (for the visit
policies' indexes: never run, lagging, re-runs); feeders lease the queues they fill

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_NEVER_RUN = "ready AND NOT ever_run"
_LAGGING = "ready AND ever_run AND source_update > result_at"
_RERUN = "ready AND ever_run"


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("executor", sa.Text(), nullable=False, server_default="local"))
        batch.add_column(sa.Column("queue", sa.Text(), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("handoff", sa.Text(), nullable=True))
        batch.add_column(sa.Column("source_update", sa.Double(), nullable=True))
    op.execute(
        "UPDATE jobs SET source_update = (SELECT last_update FROM items"
        " WHERE items.id = jobs.item_id)"
    )
    op.create_index(
        "jobs_never_run",
        "jobs",
        ["task", "niceness", sa.text("coalesce(source_update, due_at)")],
        sqlite_where=sa.text(_NEVER_RUN),
        postgresql_where=sa.text(_NEVER_RUN),
    )
    op.create_index(
        "jobs_lagging",
        "jobs",
        ["task", "niceness", sa.text("(result_at - source_update)")],
        sqlite_where=sa.text(_LAGGING),
        postgresql_where=sa.text(_LAGGING),
    )
    op.create_index(
        "jobs_rerun",
        "jobs",
        ["task", "niceness", "due_at"],
        sqlite_where=sa.text(_RERUN),
        postgresql_where=sa.text(_RERUN),
    )
    op.create_table(
        "feeders",
        sa.Column("queue", sa.Text(), primary_key=True),
        sa.Column("executor", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("until", sa.Double(), nullable=False),
        sa.Column("cap", sa.Integer(), nullable=False),
        sa.Column("broker_length", sa.Integer(), nullable=True),
        sa.Column("seen_at", sa.Double(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("feeders")
    op.drop_index("jobs_rerun", "jobs")
    op.drop_index("jobs_lagging", "jobs")
    op.drop_index("jobs_never_run", "jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("source_update")
        batch.drop_column("handoff")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("queue")
        batch.drop_column("executor")
