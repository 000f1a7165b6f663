"""Fenced batch writes to jobs: commit outcomes and renew leases.

Every statement matches ``id``, ``attempt`` and ``status = 'running'``: a worker whose lease
passed and whose job was claimed again changes nothing. Each batch is one statement; the
batch arrives as arrays (PostgreSQL) or a JSON array (SQLite).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from trawl.store import codec
from trawl.store.sql import q

_SET_OUTCOME = """
    status = b.status,
    due_at = CASE b.status WHEN 'done' THEN :now + COALESCE(jobs.ttl, b.ttl)
                           WHEN 'failed' THEN b.retry_at
                           WHEN 'skipped' THEN NULL
                           ELSE COALESCE(b.retry_at, :now) END,
    ready = (b.status = 'queued' AND b.retry_at IS NULL),
    owner = NULL,
    ever_run = (jobs.ever_run OR b.status IN ('done', 'failed')),
    result = COALESCE(b.result, jobs.result),
    result_version = CASE WHEN b.keep THEN b.version ELSE jobs.result_version END,
    result_at = CASE WHEN b.keep THEN :now ELSE jobs.result_at END,
    expires_at = CASE WHEN b.keep THEN :now + COALESCE(jobs.ttl, b.ttl) ELSE jobs.expires_at END,
    succeeded = CASE b.status WHEN 'done' THEN true WHEN 'failed' THEN false
                              ELSE jobs.succeeded END,
    fail_count = CASE b.status WHEN 'done' THEN 0 WHEN 'failed' THEN jobs.fail_count + 1
                               ELSE jobs.fail_count END,
    result_hash = CASE WHEN b.result IS NOT NULL THEN b.hash ELSE jobs.result_hash END,
    revisit_offset = COALESCE(b.revisit, jobs.revisit_offset),
    not_found = CASE WHEN b.missing THEN jobs.not_found + 1 WHEN b.status = 'done' THEN 0
                     ELSE jobs.not_found END,
    waiting = NULL,
    handoff = NULL
"""

_FENCE = "jobs.id = b.id AND jobs.attempt = b.attempt AND jobs.status = 'running'"

OUTCOME_COLUMNS = (
    "id", "attempt", "status", "result", "keep", "version", "ttl", "retry_at",
    "hash", "revisit", "missing",
)  # fmt: skip
_PG_TYPES = (
    "bigint", "int", "text", "text", "bool", "text", "float8", "float8", "text", "int", "bool",
)  # fmt: skip

# The batch is one JSON array (msgspec encodes it much faster than the driver dumps eleven
# arrays element by element); ``id = ANY(:ids)`` keeps the join on the primary key whatever
# the planner guesses of the JSON's row count.
_PG_BATCH = ", ".join(
    f"CAST(e ->> {i} AS {t}) AS {c}"
    for i, (c, t) in enumerate(zip(OUTCOME_COLUMNS, _PG_TYPES, strict=True))
)

COMMIT_POSTGRES = q(
    f"""
    UPDATE jobs SET {_SET_OUTCOME}
    FROM (SELECT {_PG_BATCH} FROM jsonb_array_elements(CAST(:batch AS jsonb)) AS j(e)) AS b
    WHERE {_FENCE} AND jobs.id = ANY(CAST(:ids AS bigint[]))
    RETURNING jobs.id, jobs.attempt
    """
)

COMMIT_SQLITE = q(
    f"""
    UPDATE jobs SET {_SET_OUTCOME}
    FROM (SELECT {", ".join(f"value ->> {i} AS {c}" for i, c in enumerate(OUTCOME_COLUMNS))}
          FROM json_each(:batch)) AS b
    WHERE {_FENCE}
    RETURNING jobs.id, jobs.attempt
    """
)

# Rows a commit in flight has locked are skipped, not waited for: they are being settled,
# and a long commit must not hold up the renewal of every other lease.
RENEW_POSTGRES = q(
    f"""
    WITH b AS (
        SELECT * FROM unnest(CAST(:id AS bigint[]), CAST(:attempt AS int[]),
                             CAST(:timeout AS float8[])) AS b(id, attempt, timeout)
    ), free AS (
        SELECT jobs.id FROM jobs JOIN b ON jobs.id = b.id
        WHERE {_FENCE} FOR UPDATE OF jobs SKIP LOCKED
    )
    UPDATE jobs SET due_at = :now + b.timeout, ready = false
    FROM b, free
    WHERE jobs.id = free.id AND b.id = free.id
    RETURNING jobs.id
    """
)

RENEW_SQLITE = q(
    f"""
    UPDATE jobs SET due_at = :now + b.timeout, ready = false
    FROM (SELECT value ->> 0 AS id, value ->> 1 AS attempt, value ->> 2 AS timeout
          FROM json_each(:batch)) AS b
    WHERE {_FENCE}
    RETURNING jobs.id
    """
)


def batch_params(
    is_sqlite: bool, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> dict[str, Any]:
    """Rows as one JSON array (SQLite) or one array per column (PostgreSQL)."""
    if is_sqlite:
        return {"batch": codec.dumps(rows)}
    return {name: [row[i] for row in rows] for i, name in enumerate(columns)}


def statement(is_sqlite: bool, sqlite: sa.TextClause, postgres: sa.TextClause) -> sa.TextClause:
    return sqlite if is_sqlite else postgres
