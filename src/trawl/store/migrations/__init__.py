"""Alembic migrations for trawl's schema."""
