"""The declared schema. Migrations must produce exactly this (a test checks)."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()


def _cascade(column: str) -> sa.ForeignKey:
    # Renames and deletes of an item carry to everything that points at it.
    return sa.ForeignKey(column, ondelete="CASCADE", onupdate="CASCADE")


# Integer on SQLite so the key is the rowid (cheap autoincrement); BIGINT elsewhere.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Time: sa.Double[float] = sa.Double()  # seconds since the epoch, UTC; the same on both backends
Flag = sa.Boolean(create_constraint=False)
# Text compares byte by byte on both backends: SQLite's BINARY, PostgreSQL's "C" collation.
# A database's own collation (often en_US.UTF-8) compares by the locale's rules, ids and urls
# in a different order than SQLite's, and at several times the cost of every index entry
# and sort over ids, urls, tags and task names (a batch of `trawl add --file` took 1.7x as
# long in an en_US.UTF-8 database: docs/scaling.md). Nothing trawl stores needs a
# language's order.
Text = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
Json = Text  # JSON text: one encoding for both backends, parsed by msgspec


items = sa.Table(
    "items",
    metadata,
    sa.Column("id", Text, primary_key=True),
    sa.Column("data", Json, nullable=False),
    sa.Column("created_by", Text, nullable=True),  # resolved at write time; may dangle
    sa.Column("created_at", Time, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
    # Kept for listers (SWH listed_origins): when a lister first and last listed the item,
    # and the last activity the source reported for it.
    sa.Column("first_seen", Time, nullable=True),
    sa.Column("last_seen", Time, nullable=True),
    sa.Column("last_update", Time, nullable=True),
)

aliases = sa.Table(
    "aliases",
    metadata,
    sa.Column("alias", Text, primary_key=True),
    sa.Column("item_id", Text, _cascade("items.id"), nullable=False),
    sa.Index("aliases_item", "item_id"),
)

tags = sa.Table(
    "tags",
    metadata,
    sa.Column("item_id", Text, _cascade("items.id"), primary_key=True),
    sa.Column("name", Text, primary_key=True),
    sa.Column("value", Text, nullable=True),
    sa.Index("tags_name", "name", "item_id"),
)

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("name", Text, primary_key=True),
    sa.Column("version", Text, nullable=False),
    sa.Column("ttl", Time, nullable=True),
    sa.Column("timeout", Time, nullable=False),
    sa.Column("retries", sa.Integer(), nullable=False),
    sa.Column("niceness", sa.Integer(), nullable=False),
    sa.Column("registered_at", Time, nullable=False),
    sa.Column("paused", Flag, nullable=False, server_default=sa.false()),
    sa.Column("paused_reason", Text, nullable=True),
    sa.Column("max_failures", sa.Integer(), nullable=True),
    # Only remote pipelines with this tag claim the task's jobs (NULL: normal pipelines).
    sa.Column("pipeline_tag", Text, nullable=True),
    # Who runs the task: "local" (trawl's workers) or "celery" (fed by `trawl feed celery`),
    # and the broker queue its jobs are published to.
    sa.Column("executor", Text, nullable=False, server_default="local"),
    sa.Column("queue", Text, nullable=True),
)

# Task -> the tasks whose valid results it needs first (depends_on).
task_deps = sa.Table(
    "task_deps",
    metadata,
    sa.Column("task", Text, _cascade("tasks.name"), primary_key=True),
    sa.Column("depends_on", Text, primary_key=True),
    sa.Column("on_change", Flag, nullable=False),  # a changed result makes the task due again
    sa.Index("task_deps_depends_on", "depends_on", "task"),
)

# Rate limits as the app declared them (so `trawl limits` works without the app's code).
limits = sa.Table(
    "limits",
    metadata,
    sa.Column("name", Text, primary_key=True),
    sa.Column("rate", sa.Double(), nullable=False),  # permits per second
    sa.Column("burst", sa.Integer(), nullable=False),
    sa.Column("tasks", Json, nullable=True),  # JSON list of task name patterns; NULL: global
    sa.Column("keyed", Flag, nullable=False),
    sa.Column("registered_at", Time, nullable=False),
)

# GCRA state per limit and key: the theoretical arrival time of the next permit.
limit_state = sa.Table(
    "limit_state",
    metadata,
    sa.Column("name", Text, primary_key=True),
    sa.Column("key", Text, primary_key=True),
    sa.Column("tat", Time, nullable=False),
)

task_tags = sa.Table(
    "task_tags",
    metadata,
    sa.Column("task", Text, _cascade("tasks.name"), primary_key=True),
    sa.Column("tag", Text, primary_key=True),
    sa.Index("task_tags_tag", "tag", "task"),
)

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("item_id", Text, _cascade("items.id"), nullable=False),
    sa.Column("task", Text, nullable=False),
    sa.Column("status", Text, nullable=False),
    # When to look again; NULL means final. Claimable <=> due_at <= now.
    sa.Column("due_at", Time, nullable=True),
    # Cached "due_at <= now" so the claim index holds only due rows: rows due later sit in
    # jobs_pending and are promoted when their time comes (see store/jobs.py).
    sa.Column("ready", Flag, nullable=False),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("owner", Text, nullable=True),
    sa.Column("niceness", sa.Integer(), nullable=False),
    sa.Column("ever_run", Flag, nullable=False),
    sa.Column("selected", Flag, nullable=False),  # some tag of the item still selects the task
    sa.Column("result", Json, nullable=True),
    sa.Column("result_version", Text, nullable=True),
    sa.Column("result_at", Time, nullable=True),
    sa.Column("expires_at", Time, nullable=True),
    sa.Column("ttl", Time, nullable=True),  # per-item override of the task's TTL
    sa.Column("succeeded", Flag, nullable=True),
    sa.Column("fail_count", sa.Integer(), nullable=False),  # consecutive failed attempts
    sa.Column("result_hash", Text, nullable=True),  # tells eventful runs from uneventful
    sa.Column("revisit_offset", sa.Integer(), nullable=False, server_default=sa.text("0")),
    sa.Column("not_found", sa.Integer(), nullable=False, server_default=sa.text("0")),
    # Why a due job was not claimed: "limit:<name>" (deferred) or "deps" (waiting).
    sa.Column("waiting", Text, nullable=True),
    # A running job handed to an external executor: "claimed" (leased by a feeder, not yet
    # known to be published), "queued" (published to the broker), "started" (an executor's
    # worker runs it). NULL for jobs trawl's own workers run.
    sa.Column("handoff", Text, nullable=True),
    # The item's last_update (when the source last changed, as a lister reported it), kept
    # on the job so each visit policy is an index range scan (store/policies.py).
    sa.Column("source_update", Time, nullable=True),
    sa.UniqueConstraint("item_id", "task", name="jobs_item_task"),
    sa.Index(
        "jobs_claim",
        "task",
        "niceness",
        "ever_run",
        "due_at",
        sqlite_where=sa.text("ready"),
        postgresql_where=sa.text("ready"),
    ),
    sa.Index(
        "jobs_pending",
        "due_at",
        sqlite_where=sa.text("NOT ready AND due_at IS NOT NULL"),
        postgresql_where=sa.text("NOT ready AND due_at IS NOT NULL"),
    ),
    # Visit policies: never-run jobs, oldest source activity first (else oldest due) ...
    sa.Index(
        "jobs_never_run",
        "task",
        "niceness",
        sa.text("coalesce(source_update, due_at)"),
        sqlite_where=sa.text("ready AND NOT ever_run"),
        postgresql_where=sa.text("ready AND NOT ever_run"),
    ),
    # ... and re-runs whose source changed longest after our last result (largest lag).
    sa.Index(
        "jobs_lagging",
        "task",
        "niceness",
        sa.text("(result_at - source_update)"),
        sqlite_where=sa.text("ready AND ever_run AND source_update > result_at"),
        postgresql_where=sa.text("ready AND ever_run AND source_update > result_at"),
    ),
    # ... and re-runs, the longest overdue first.
    sa.Index(
        "jobs_rerun",
        "task",
        "niceness",
        "due_at",
        sqlite_where=sa.text("ready AND ever_run"),
        postgresql_where=sa.text("ready AND ever_run"),
    ),
    sa.Index("jobs_task_status", "task", "status"),
    sa.Index(
        "jobs_waiting",
        "waiting",
        sqlite_where=sa.text("waiting IS NOT NULL"),
        postgresql_where=sa.text("waiting IS NOT NULL"),
    ),
)

failures = sa.Table(
    "failures",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("job_id", BigId, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("item_id", Text, nullable=False),
    sa.Column("task", Text, nullable=False),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("error_type", Text, nullable=False),
    sa.Column("message", Text, nullable=False),
    sa.Column("traceback", Text, nullable=False),
    sa.Column("occurred_at", Time, nullable=False),
    sa.Column("handled", Flag, nullable=False),
    # The task had called allow_failure(): listed, but not counted against max_failures.
    sa.Column("allowed", Flag, nullable=False, server_default=sa.false()),
    sa.Index("failures_task", "task", "handled"),
    sa.Index("failures_job", "job_id"),
)

journal = sa.Table(
    "journal",
    metadata,
    sa.Column("seq", BigId, primary_key=True, autoincrement=True),
    sa.Column("at", Time, nullable=False),
    sa.Column("kind", Text, nullable=False),
    sa.Column("item_id", Text, nullable=True),
    sa.Column("task", Text, nullable=True),
    sa.Column("detail", Json, nullable=True),
)

# -- crawls (trawl.crawl): a crawl's pages are items; fetching one is a job of trawl.fetch ----

crawls = sa.Table(
    "crawls",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("spec", Text, nullable=True),  # digest of the command: rerunning it resumes
    sa.Column("seeds", Json, nullable=False),
    sa.Column("depth_limit", sa.Integer(), nullable=True),  # NULL: unlimited
    sa.Column("niceness", sa.Integer(), nullable=False),
    sa.Column("concurrency", sa.Integer(), nullable=False),
    sa.Column("tag", Text, nullable=True),
    sa.Column("created_by", Text, nullable=True),
    sa.Column("note", Text, nullable=True),
    sa.Column("aborted", Flag, nullable=False),
    sa.Column("ruleset", sa.Integer(), nullable=False),  # the current ruleset version
    sa.Column("options", Json, nullable=False),  # delay, robots, WARC path, timeouts, caps
    sa.Column("created_at", Time, nullable=False),
    sa.Index("crawls_spec", "spec"),
)

crawl_rulesets = sa.Table(
    "crawl_rulesets",
    metadata,
    sa.Column("crawl_id", BigId, _cascade("crawls.id"), primary_key=True),
    sa.Column("version", sa.Integer(), primary_key=True),
    sa.Column("rules", Json, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("note", Text, nullable=True),
)

# One row per (crawl, canonical URL); the page's item is page:<crawl>:<url>.
crawl_pages = sa.Table(
    "crawl_pages",
    metadata,
    sa.Column("crawl_id", BigId, _cascade("crawls.id"), primary_key=True),
    sa.Column("url", Text, primary_key=True),
    sa.Column("item_id", Text, _cascade("items.id"), nullable=False),
    sa.Column("depth", sa.Integer(), nullable=False),  # the shortest discovery path
    sa.Column("via", Text, nullable=True),  # the parent on that path
    sa.Column("skip", Text, nullable=True),  # why skipped: depth, rule:<v>, robots
    sa.Column("found_at", Time, nullable=False),
    sa.Index("crawl_pages_depth", "crawl_id", "depth"),
    # Joins from jobs to their pages (progress counts) look pages up by item.
    sa.Index("crawl_pages_item", "item_id", unique=True),
)

# Every discovery parent -> child; hops is 1 for a link, 0 for a redirect.
crawl_links = sa.Table(
    "crawl_links",
    metadata,
    sa.Column("crawl_id", BigId, _cascade("crawls.id"), primary_key=True),
    sa.Column("parent", Text, primary_key=True),
    sa.Column("child", Text, primary_key=True),
    sa.Column("hops", sa.Integer(), nullable=False),
)

crawl_attempts = sa.Table(
    "crawl_attempts",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("crawl_id", BigId, _cascade("crawls.id"), nullable=False),
    sa.Column("url", Text, nullable=False),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("ruleset", sa.Integer(), nullable=False),
    sa.Column("host", Text, nullable=False),
    sa.Column("started_at", Time, nullable=False),
    sa.Column("elapsed", Time, nullable=False),
    sa.Column("outcome", Text, nullable=False),  # done, failed, retry, skipped
    sa.Column("status_code", sa.Integer(), nullable=True),
    sa.Column("location", Text, nullable=True),  # a redirect's target
    sa.Column("content_type", Text, nullable=True),
    sa.Column("size", sa.BigInteger(), nullable=True),
    sa.Column("outlinks", sa.Integer(), nullable=False),
    sa.Column("outlinks_cut", Text, nullable=True),  # why links were not all kept
    sa.Column("error", Text, nullable=True),
    sa.Column("digest", Text, nullable=True),  # of the payload
    sa.Column("warc_file", Text, nullable=True),
    sa.Column("warc_offset", sa.BigInteger(), nullable=True),
    sa.Column("warc_length", sa.BigInteger(), nullable=True),
    # A page rendered in a browser: the requests it made (null: not rendered), where its
    # screenshot's WARC record is, and its custom script's result (JSON).
    sa.Column("subrequests", sa.Integer(), nullable=True),
    sa.Column("screenshot_file", Text, nullable=True),
    sa.Column("screenshot_offset", sa.BigInteger(), nullable=True),
    sa.Column("screenshot_length", sa.BigInteger(), nullable=True),
    sa.Column("script_result", Text, nullable=True),
    sa.Index("crawl_attempts_url", "crawl_id", "url"),
    sa.Index("crawl_attempts_time", "crawl_id", "started_at"),
)

# Payload digests already archived in full: later copies become WARC revisit records.
crawl_payloads = sa.Table(
    "crawl_payloads",
    metadata,
    sa.Column("crawl_id", BigId, _cascade("crawls.id"), primary_key=True),
    sa.Column("digest", Text, primary_key=True),
    sa.Column("url", Text, nullable=False),
    sa.Column("date", Text, nullable=False),
)

# Politeness per host, shared by every worker: the next request start, and a whole-host
# block after 429/503 (Retry-After).
crawl_hosts = sa.Table(
    "crawl_hosts",
    metadata,
    sa.Column("host", Text, primary_key=True),
    sa.Column("next_at", Time, nullable=False),
    sa.Column("blocked_until", Time, nullable=True),
    # Consecutive 5xx, timeouts and connection errors: the whole host backs off on them.
    sa.Column("errors", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("errors_since", Time, nullable=True),  # when the run of errors began
)

# Requests in flight, per key ("host:<host>", "crawl:<id>"). A slot counts only while its
# page's job is running the same attempt and `until` has not passed, so a killed worker's
# slots free themselves when its jobs are claimed again.
crawl_slots = sa.Table(
    "crawl_slots",
    metadata,
    sa.Column("key", Text, primary_key=True),
    sa.Column("item_id", Text, primary_key=True),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("until", Time, nullable=False),
)

crawl_robots = sa.Table(
    "crawl_robots",
    metadata,
    sa.Column("host", Text, primary_key=True),
    sa.Column("status", sa.Integer(), nullable=False),
    sa.Column("body", Text, nullable=False),
    sa.Column("fetched_at", Time, nullable=False),
)

# -- the server (trawl.server) ----------------------------------------------------------------

# API tokens: the secret is never stored, only its scrypt hash with a per-token salt. A token
# is "trawl_<id>_<secret>": the id finds the row, so checking costs one hash, not one per row.
tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", Text, primary_key=True),
    sa.Column("name", Text, nullable=False, unique=True),
    sa.Column("scope", Text, nullable=False),  # read | write | admin
    sa.Column("salt", sa.LargeBinary(), nullable=False),
    sa.Column("hash", sa.LargeBinary(), nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("last_used_at", Time, nullable=True),  # updated at most once a minute
    sa.Column("revoked_at", Time, nullable=True),
)

# One feeder per external queue (``trawl feed celery``): who feeds it, until when (a lease
# the feeder renews), its cap, and the queue's length in the broker when it last looked.
feeders = sa.Table(
    "feeders",
    metadata,
    sa.Column("queue", Text, primary_key=True),
    sa.Column("executor", Text, nullable=False),
    sa.Column("owner", Text, nullable=False),
    sa.Column("until", Time, nullable=False),
    sa.Column("cap", sa.Integer(), nullable=False),
    sa.Column("broker_length", sa.Integer(), nullable=True),
    sa.Column("seen_at", Time, nullable=True),
)

# A named reader of the journal and the last seq it acknowledged; pruning keeps what a
# consumer has not acknowledged.
journal_consumers = sa.Table(
    "journal_consumers",
    metadata,
    sa.Column("name", Text, primary_key=True),
    sa.Column("position", sa.BigInteger(), nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("acked_at", Time, nullable=True),
)

# Remote pipelines (trawl.server): workers on other machines that claim over a WebSocket.
# The token is stored as a scrypt hash like an API token's. The session columns say what
# the pipeline's open session (if any) last reported; the live registry is the truth of
# whether it is connected, these are for `trawl pipeline list` from anywhere.
pipelines = sa.Table(
    "pipelines",
    metadata,
    sa.Column("id", Text, primary_key=True),
    sa.Column("salt", sa.LargeBinary(), nullable=False),
    sa.Column("hash", sa.LargeBinary(), nullable=False),
    sa.Column("tags", Json, nullable=False),  # JSON list of names
    sa.Column("match_only", Flag, nullable=False),
    sa.Column("slots", sa.Integer(), nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("token_rotated_at", Time, nullable=False),
    sa.Column("draining", Flag, nullable=False, server_default=sa.false()),
    sa.Column("connected_at", Time, nullable=True),
    sa.Column("server", Text, nullable=True),
    sa.Column("last_checkin", Time, nullable=True),
    sa.Column("client_version", Text, nullable=True),
    sa.Column("in_use", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("disk_free", sa.BigInteger(), nullable=True),
    sa.Column("disk_total", sa.BigInteger(), nullable=True),
    # An operator's pin: some (crawl_slots) or all of the pipeline's slots fetch only this
    # crawl's pages, until it finishes (crawl_lock "finished") or until unpinned ("forever").
    sa.Column("crawl", sa.BigInteger(), nullable=True),
    sa.Column("crawl_lock", Text, nullable=True),
    sa.Column("crawl_slots", sa.Integer(), nullable=True),  # of its slots; NULL: all
)
