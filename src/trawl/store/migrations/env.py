"""Alembic environment: runs on the connection trawl hands it (no alembic.ini needed)."""

from __future__ import annotations

from alembic import context

from trawl.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    transaction_per_migration=True,
)
with context.begin_transaction():
    context.run_migrations()
