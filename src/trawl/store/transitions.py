"""Fenced batch writes to jobs: commit outcomes and renew leases.

Every statement matches ``id``, ``attempt`` and ``status = 'running'``: a worker whose lease
passed and whose job was claimed again changes nothing. Each batch is one statement; the
batch arrives as a JSON array (SQLite) or, on PostgreSQL, as a JSON object holding each
job's values under its "id attempt", read by key from the job's own row: the statement
has no join whose plan could grow with the square of the batch.
"""

from __future__ import annotations

import re
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

# On PostgreSQL the batch is one JSON object, each outcome under its job's "id attempt"
# (msgspec encodes it much faster than the driver dumps eleven arrays element by element),
# and each job row found by ``id = ANY(:ids)`` reads its own outcome by that key, so the
# fence on the attempt is the key itself. There is no join for the planner to get wrong: as
# a join to ``jsonb_array_elements`` (whose row count it guesses at 100, with ``status =
# 'running'`` rare in statistics taken between batches) it chose a nested loop that
# expanded the whole batch again for every job row, 60 ms for 500 jobs.
_KEY = "CAST(jobs.id AS text) || ' ' || CAST(jobs.attempt AS text)"
_ROW = f"(CAST(:batch AS jsonb) -> ({_KEY}))"
_PG_FIELDS = {
    c: f"CAST({_ROW} ->> {i} AS {t})"
    for i, (c, t) in enumerate(zip(OUTCOME_COLUMNS, _PG_TYPES, strict=True))
}
_SET_OUTCOME_POSTGRES = re.sub(r"\bb\.(\w+)", lambda m: _PG_FIELDS[m[1]], _SET_OUTCOME)

COMMIT_POSTGRES = q(
    f"""
    UPDATE jobs SET {_SET_OUTCOME_POSTGRES}
    WHERE jobs.id = ANY(CAST(:ids AS bigint[])) AND jobs.status = 'running'
      AND {_ROW} IS NOT NULL
    RETURNING jobs.id, jobs.attempt
    """
)


def outcome_params(is_sqlite: bool, rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """A batch of outcome rows (OUTCOME_COLUMNS) as COMMIT_SQLITE or COMMIT_POSTGRES take it."""
    return _keyed(is_sqlite, rows, rows)


def renew_params(is_sqlite: bool, leases: Sequence[tuple[int, int, float]]) -> dict[str, Any]:
    """Leases (job id, attempt, seconds) as RENEW_SQLITE or RENEW_POSTGRES take them."""
    return _keyed(is_sqlite, leases, [(seconds,) for _, _, seconds in leases])


def _keyed(
    is_sqlite: bool, rows: Sequence[Sequence[Any]], values: Sequence[Sequence[Any]]
) -> dict[str, Any]:
    """SQLite: *rows* as one JSON array. PostgreSQL: each row's *values* under its job's
    "id attempt" (the key ``_ROW`` reads), and the ids."""
    if is_sqlite:
        return {"batch": codec.dumps(rows)}
    keyed = {f"{row[0]} {row[1]}": value for row, value in zip(rows, values, strict=True)}
    return {"batch": codec.dumps(keyed), "ids": [row[0] for row in rows]}


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
# and a long commit must not hold up the renewal of every other lease. Each lease's seconds
# are found by its job's key, as a commit's outcome is (above): joined to the unnested
# arrays, a generic plan's nested loop took 294 ms to renew 1,000 leases.
RENEW_POSTGRES = q(
    f"""
    WITH free AS (
        SELECT id FROM jobs
        WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'running' AND {_ROW} IS NOT NULL
        FOR UPDATE SKIP LOCKED
    )
    UPDATE jobs SET due_at = :now + CAST({_ROW} ->> 0 AS float8), ready = false
    WHERE jobs.id = ANY(ARRAY(SELECT id FROM free))
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
