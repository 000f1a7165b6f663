"""The claim: one statement that leases a batch of due jobs, best first.

Rows due later wait in the ``jobs_pending`` index; :data:`PROMOTE` moves the ones whose
time has come into ``jobs_claim`` (``ready``), so the claim reads only due rows and stays an
index range scan however many jobs are waiting for their time. A running job whose lease
ran out is not promoted: it is a crashed attempt, settled first (``queues.lapsed``) so the
crash counts against the job's retries instead of the job being run again for ever.
"""

from __future__ import annotations

from functools import cache

import sqlalchemy as sa

from trawl.store.sql import q

PROMOTE_BATCH = 5000

PROMOTE_SQLITE = q(
    f"""
    UPDATE jobs SET ready = true
    WHERE id IN (SELECT id FROM jobs
                 WHERE NOT ready AND due_at IS NOT NULL AND due_at <= :now
                   AND status <> 'running'
                 ORDER BY due_at LIMIT {PROMOTE_BATCH})
    """
)

# ``id = ANY(ARRAY(...))`` rather than ``id IN (...)``: with IN, once the planner expects
# thousands of due rows (a backlog) it hash-joins against a sequential scan of all jobs.
PROMOTE_POSTGRES = q(
    f"""
    UPDATE jobs SET ready = true
    WHERE id = ANY(ARRAY(SELECT id FROM jobs
                         WHERE NOT ready AND due_at IS NOT NULL AND due_at <= :now
                           AND status <> 'running'
                         ORDER BY due_at LIMIT {PROMOTE_BATCH} FOR UPDATE SKIP LOCKED))
    """
)

# What a claim hands the worker: the job, the item's data, and what the last result was.
# What a claim hands the worker: the job, the item's data and tags (one JSON object per
# row, saving a query per claim), and what the last result was.
CLAIMED_POSTGRES = """
    jobs.id, jobs.item_id, jobs.task, jobs.attempt, jobs.fail_count, items.data,
    jobs.result_hash, jobs.revisit_offset, jobs.not_found,
    (SELECT CAST(json_object_agg(t.name, t.value) AS text) FROM tags t
     WHERE t.item_id = jobs.item_id)
"""
# In RETURNING, SQLite (3.40 at least) plans ``items.id = jobs.item_id`` as a full scan of
# items for every claimed row; comparing with an expression (the CAST) lets it use the key.
CLAIMED_SQLITE = """
    jobs.id, item_id, task, attempt, fail_count,
    (SELECT data FROM items WHERE items.id = CAST(jobs.item_id AS TEXT)),
    result_hash, revisit_offset, not_found,
    (SELECT json_group_object(t.name, t.value) FROM tags t
     WHERE t.item_id = CAST(jobs.item_id AS TEXT))
"""
# Paused tasks are skipped inside the claim itself (no separate query).
_NOT_PAUSED = "NOT EXISTS (SELECT 1 FROM tasks k WHERE k.name = {task} AND k.paused)"

# Per task: the best due rows, locked without waiting on other workers' locks. The outer
# ORDER BY merges the per-task heads so niceness orders claims across tasks too. The rows
# are updated by ``id = ANY(ARRAY(...))``, not by joining ``picked``: joined, a claim large
# next to the table (400 of 50,000 jobs) was planned as a hash join over a sequential scan
# of all of ``jobs`` (EXPLAIN ANALYZE: 20.8 ms, against 10.6 ms this way).
CLAIM_POSTGRES = q(
    f"""
    WITH wanted AS (
        SELECT * FROM unnest(CAST(:tasks AS text[]), CAST(:timeouts AS float8[]))
            AS w(task, timeout)
        WHERE {_NOT_PAUSED.format(task="w.task")}
    ), picked AS (
        SELECT c.id FROM wanted w CROSS JOIN LATERAL (
            SELECT id, niceness, ever_run, due_at FROM jobs
            WHERE task = w.task AND ready AND due_at <= :now
            ORDER BY niceness, ever_run, due_at
            LIMIT :limit FOR UPDATE SKIP LOCKED
        ) c
        ORDER BY c.niceness, c.ever_run, c.due_at LIMIT :limit
    )
    UPDATE jobs SET status = 'running', attempt = jobs.attempt + 1,
                    due_at = :now + (SELECT w.timeout FROM wanted w WHERE w.task = jobs.task),
                    ready = false, owner = :owner, waiting = NULL
    FROM items
    WHERE jobs.id = ANY(ARRAY(SELECT id FROM picked)) AND items.id = jobs.item_id
    RETURNING {CLAIMED_POSTGRES}
    """
)


@cache
def claim_sqlite(task_count: int) -> sa.TextClause:
    """SQLite has one writer, so no locking clause; one subquery per task keeps each a range
    scan of ``jobs_claim``.

    """
    heads = " UNION ALL ".join(
        f"""SELECT * FROM (SELECT id, niceness, ever_run, due_at FROM jobs
                          WHERE task = :task{i} AND ready AND due_at <= :now
                            AND {_NOT_PAUSED.format(task=f":task{i}")}
                          ORDER BY niceness, ever_run, due_at LIMIT :limit)"""
        for i in range(task_count)
    )
    timeout = " ".join(f"WHEN :task{i} THEN :timeout{i}" for i in range(task_count))
    return q(
        f"""
        UPDATE jobs SET status = 'running', attempt = attempt + 1,
                        due_at = :now + (CASE task {timeout} END), ready = false, owner = :owner,
                        waiting = NULL
        WHERE id IN (SELECT id FROM ({heads}) ORDER BY niceness, ever_run, due_at LIMIT :limit)
        RETURNING {CLAIMED_SQLITE}
        """
    )


def claim_sqlite_params(tasks: list[str], timeouts: list[float]) -> dict[str, object]:
    params: dict[str, object] = {}
    for i, (task, timeout) in enumerate(zip(tasks, timeouts, strict=True)):
        params[f"task{i}"] = task
        params[f"timeout{i}"] = timeout
    return params


# Leasing jobs a gated claim chose (by id; they are already locked by this transaction).
# The ids are matched on the primary key first, then to their timeouts: joined to the
# unnested list alone, a lease of 400 of 50,000 jobs was a hash join over a sequential scan
# of all of them (EXPLAIN ANALYZE 15.9 ms, against 5.8 ms this way).
LEASE_POSTGRES = q(
    f"""
    UPDATE jobs SET status = 'running', attempt = jobs.attempt + 1,
                    due_at = :now + b.timeout, ready = false, owner = :owner, waiting = NULL
    FROM unnest(CAST(:id AS bigint[]), CAST(:timeout AS float8[])) AS b(id, timeout), items
    WHERE jobs.id = ANY(CAST(:id AS bigint[])) AND jobs.id = b.id AND items.id = jobs.item_id
    RETURNING {CLAIMED_POSTGRES}
    """
)

LEASE_SQLITE = q(
    f"""
    UPDATE jobs SET status = 'running', attempt = attempt + 1,
                    due_at = :now + b.timeout, ready = false, owner = :owner, waiting = NULL
    FROM (SELECT value ->> 0 AS id, value ->> 1 AS timeout FROM json_each(:batch)) AS b
    WHERE jobs.id = b.id
    RETURNING {CLAIMED_SQLITE}
    """
)


@cache
def held(sqlite: bool, task_count: int) -> sa.TextClause:
    """The running jobs of some tasks whose lease an owner holds, in the claim's row shape:
    what a worker takes back when the answer to its claim was lost with its connection."""
    tasks = ", ".join(f":task{i}" for i in range(task_count))
    if sqlite:
        return q(
            f"SELECT {CLAIMED_SQLITE} FROM jobs"
            f" WHERE task IN ({tasks}) AND status = 'running' AND owner = :owner ORDER BY jobs.id"
        )
    return q(
        f"SELECT {CLAIMED_POSTGRES} FROM jobs JOIN items ON items.id = jobs.item_id"
        f" WHERE jobs.task IN ({tasks}) AND jobs.status = 'running' AND jobs.owner = :owner"
        " ORDER BY jobs.id"
    )


# A remote pipeline's claim of crawl pages: the fetch task's due jobs whose page belongs to
# one of the crawls routed to it (its tags, the crawl's tag), best first.
CLAIM_PAGES_POSTGRES = q(
    f"""
    WITH picked AS (
        SELECT j.id FROM jobs j JOIN crawl_pages p ON p.item_id = j.item_id
        WHERE j.task = :task AND j.ready AND j.due_at <= :now
          AND p.crawl_id = ANY(CAST(:crawls AS bigint[]))
          AND {_NOT_PAUSED.format(task=":task")}
        ORDER BY j.niceness, j.ever_run, j.due_at
        LIMIT :limit FOR UPDATE OF j SKIP LOCKED
    )
    UPDATE jobs SET status = 'running', attempt = jobs.attempt + 1,
                    due_at = :now + :timeout, ready = false, owner = :owner, waiting = NULL
    FROM items
    WHERE jobs.id = ANY(ARRAY(SELECT id FROM picked)) AND items.id = jobs.item_id
    RETURNING {CLAIMED_POSTGRES}
    """
)

CLAIM_PAGES_SQLITE = q(
    f"""
    UPDATE jobs SET status = 'running', attempt = attempt + 1,
                    due_at = :now + :timeout, ready = false, owner = :owner, waiting = NULL
    WHERE id IN (
        SELECT j.id FROM jobs j JOIN crawl_pages p ON p.item_id = j.item_id
        WHERE j.task = :task AND j.ready AND j.due_at <= :now
          AND p.crawl_id IN (SELECT value FROM json_each(:crawls))
          AND {_NOT_PAUSED.format(task=":task")}
        ORDER BY j.niceness, j.ever_run, j.due_at LIMIT :limit)
    RETURNING {CLAIMED_SQLITE}
    """
)
