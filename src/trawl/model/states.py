"""Job states. ``due_at`` says when to look again; status says what happened last."""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """The lifecycle of one (item, task) pair: ``queued -> running -> done | failed``."""

    QUEUED = "queued"  # never finished an attempt yet, or released
    RUNNING = "running"  # claimed; due_at is the lease expiry
    DONE = "done"  # last attempt succeeded; due_at is expires_at (TTL) or NULL
    FAILED = "failed"  # last attempt failed; due_at is the retry time or NULL
    # Set aside without running (a crawl's page beyond the depth limit or rejected by a
    # rule); due_at is NULL until something (a shorter path to the page) makes it due again.
    SKIPPED = "skipped"


class Outcome(StrEnum):
    """How an attempt ended, as the worker reports it to the engine."""

    SUCCESS = "success"
    FAILURE = "failure"
    RELEASED = "released"  # shut down before finishing: due again at once, no failure
    DEFERRED = "deferred"  # ctx.defer(until): only due_at moves; no failure, no retry used
    SKIPPED = "skipped"  # ctx.skip(): status skipped, due_at NULL; no failure


class Journal(StrEnum):
    """Kinds of journal rows, one per committed change."""

    ITEM_CREATED = "item.created"
    ITEM_UPDATED = "item.updated"
    ITEM_DELETED = "item.deleted"
    ITEM_RENAMED = "item.renamed"
    ITEM_MERGED = "item.merged"
    ALIAS_CREATED = "alias.created"
    ALIAS_DELETED = "alias.deleted"
    TAG_ADDED = "tag.added"
    TAG_REMOVED = "tag.removed"
    JOB_DONE = "job.done"
    JOB_FAILED = "job.failed"
    JOB_RELEASED = "job.released"
    JOB_DEFERRED = "job.deferred"
    JOB_SKIPPED = "job.skipped"
    JOB_STALE = "job.stale"
    JOB_EXPIRED = "job.expired"
    JOB_TTL = "job.ttl"
    JOB_RETRY = "job.retry"
    METADATA_UPDATED = "metadata.updated"
    FAILURE_HANDLED = "failure.handled"
    TASK_REGISTERED = "task.registered"
    TASK_VERSION = "task.version"
    TASK_PAUSED = "task.paused"
    TASK_RESUMED = "task.resumed"
    CRAWL_CREATED = "crawl.created"
    CRAWL_ABORTED = "crawl.aborted"
    CRAWL_RESUMED = "crawl.resumed"
    CRAWL_CONCURRENCY = "crawl.concurrency"
    CRAWL_NICENESS = "crawl.niceness"
    CRAWL_RULES = "crawl.rules"
    LOG = "log"
