"""browser: a crawl attempt rendered in a browser records its sub-requests, where its
screenshot went in the WARC, and its custom script's result

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("crawl_attempts") as batch:
        batch.add_column(sa.Column("subrequests", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("screenshot_file", sa.Text(), nullable=True))
        batch.add_column(sa.Column("screenshot_offset", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("screenshot_length", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("script_result", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("crawl_attempts") as batch:
        for name in (
            "script_result",
            "screenshot_length",
            "screenshot_offset",
            "screenshot_file",
            "subrequests",
        ):
            batch.drop_column(name)
