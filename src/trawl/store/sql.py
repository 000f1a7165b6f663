"""Statements shared by the store modules, written once as readable SQL."""

from __future__ import annotations

import sqlalchemy as sa


def q(text: str) -> sa.TextClause:
    """A named SQL statement (compiled once, cached by SQLAlchemy)."""
    return sa.text(text)


RESOLVE = q("SELECT item_id FROM aliases WHERE alias = :alias")

NEW_JOBS = """
    INSERT INTO jobs (item_id, task, status, due_at, ready, attempt, niceness,
                      ever_run, selected, fail_count, source_update)
"""

# A job a removed tag had deselected comes back when a tag selects its task again: due now,
# or when its result expires if it has a good one.
RESELECT = """
    ON CONFLICT (item_id, task) DO UPDATE SET
        selected = true,
        due_at = CASE WHEN jobs.status = 'done' THEN jobs.expires_at ELSE :now END,
        ready = CASE WHEN jobs.status = 'done'
                     THEN COALESCE(jobs.expires_at <= :now, false) ELSE true END
    WHERE NOT jobs.selected
"""

# New jobs for every task a tag selects.
SELECT_JOBS_FOR_TAG = q(
    f"""{NEW_JOBS}
    SELECT :item_id, tt.task, 'queued', :now, true, 0,
           COALESCE(:niceness, t.niceness), false, true, 0,
           (SELECT last_update FROM items WHERE id = :item_id)
    FROM task_tags tt JOIN tasks t ON t.name = tt.task
    WHERE tt.tag = :tag
    {RESELECT}"""
)

# A job stays selected while any remaining tag of its item selects its task.
DESELECT_ORPHANED_JOBS = q(
    """
    UPDATE jobs SET selected = false, due_at = NULL, ready = false
    WHERE item_id = :item_id AND selected AND status <> 'running'
      AND task IN (SELECT task FROM task_tags WHERE tag = :tag)
      AND NOT EXISTS (
          SELECT 1 FROM tags t JOIN task_tags tt ON tt.tag = t.name
          WHERE t.item_id = jobs.item_id AND tt.task = jobs.task)
    """
)

NOTIFY = q("SELECT pg_notify('trawl_work', '')")
