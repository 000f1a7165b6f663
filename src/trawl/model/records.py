"""Typed records that cross layers: claimed jobs, outcomes, items, status rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from trawl.model.effects import Effect, JSONObject
from trawl.model.states import JobStatus, Outcome


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskInfo:
    """What the database knows of a task: enough to run commands without the app's code."""

    name: str
    version: str
    tags: tuple[str, ...]
    ttl: float | None
    timeout: float
    retries: int
    niceness: int = 0
    depends_on: tuple[str, ...] = ()
    rerun_on_change: bool = True
    max_failures: int | None = None
    pipeline_tag: str | None = None  # only remote pipelines with this tag run it
    executor: str = "local"  # who runs it: trawl's workers, or "celery"
    queue: str | None = None  # the broker queue of an external executor


# ClaimedJob and AttemptResult are made once per job on the worker's hot path: msgspec
# Structs (frozen, keyword-only, like the dataclasses around them), because a frozen
# dataclass's __init__ goes through object.__setattr__ for every field.


class ClaimedJob(msgspec.Struct, frozen=True, kw_only=True):
    """One job handed to a worker, with the item as it was at claim time."""

    job_id: int
    item_id: str
    task: str
    attempt: int
    data: JSONObject
    tags: dict[str, str | None]
    fail_count: int
    result_hash: str | None = None  # of the stored result, to tell eventful runs
    revisit_offset: int = 0
    not_found: int = 0  # not-found results in a row


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureInfo:
    """Why an attempt failed."""

    error_type: str
    message: str
    traceback: str = ""


class AttemptResult(msgspec.Struct, frozen=True, kw_only=True):
    """How one attempt ended, with everything it asked for, ready to be committed."""

    job_id: int
    item_id: str
    task: str
    attempt: int
    outcome: Outcome
    version: str
    ttl: float | None
    result: str | None = None  # the task's metadata, already JSON-encoded
    effects: tuple[Effect, ...] = ()
    failure: FailureInfo | None = None
    retry_delay: float | None = None  # None: retries exhausted
    apply_on_failure: bool = False
    result_hash: str | None = None
    revisit_offset: int | None = None  # the new adaptive-revisit offset, if the task has one
    not_found: bool = False  # the task said the thing is gone (trawl.NotFound)
    changed: bool = True  # eventful: the result differs from the stored one
    defer_until: float | None = None  # Outcome.DEFERRED: when the job is due again


@dataclass(frozen=True, kw_only=True, slots=True)
class CommitReport:
    """What a batch commit did: which attempts were stale and which turned into failures."""

    committed: list[int] = field(default_factory=list)
    stale: list[int] = field(default_factory=list)
    effect_failures: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobView:
    """A job as ``trawl show`` presents it."""

    task: str
    status: JobStatus
    due_at: float | None
    attempt: int
    owner: str | None
    niceness: int
    result: Any
    result_version: str | None
    result_at: float | None
    expires_at: float | None
    ttl: float | None
    succeeded: bool | None
    ever_run: bool
    selected: bool
    fail_count: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ItemView:
    """An item with everything attached to it, as lookups through an alias return it."""

    id: str
    data: JSONObject
    tags: dict[str, str | None]
    aliases: tuple[str, ...]
    created_by: str | None
    created_at: float
    updated_at: float
    jobs: tuple[JobView, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class NewItem:
    """An item to add from the CLI or the API."""

    id: str
    tags: tuple[tuple[str, str | None], ...] = ()
    data: JSONObject = field(default_factory=dict)
    niceness: int | None = None  # None: each task's own niceness


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskCounts:
    """One line of ``trawl status``."""

    task: str
    version: str | None
    queued: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    due_now: int = 0
    unhandled_failures: int = 0
    registered: bool = True
    paused: str | None = None  # why the task is paused, if it is


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureRecord:
    id: int
    job_id: int
    item_id: str
    task: str
    attempt: int
    error_type: str
    message: str
    traceback: str
    occurred_at: float
    handled: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class JournalEntry:
    seq: int
    at: float
    kind: str
    item_id: str | None
    task: str | None
    detail: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenRow:
    """An API token as stored: never its secret."""

    name: str
    scope: str  # read | write | admin
    created_at: float
    last_used_at: float | None
    revoked_at: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class PipelineRow:
    """A remote pipeline as stored: its identity and routing, and what its last session
    said of itself (never its token)."""

    id: str
    tags: tuple[str, ...]
    match_only: bool  # takes only work routed to one of its tags
    slots: int
    created_at: float
    token_rotated_at: float
    draining: bool  # told to finish what it holds and claim nothing more
    connected_at: float | None  # None: no session open
    server: str | None  # the server node holding its session
    last_checkin: float | None
    client_version: str | None
    in_use: int  # slots busy, as its last ping said
    disk_free: int | None  # bytes, as its last ping said
    disk_total: int | None
    crawl: int | None = None  # pinned to this crawl's pages
    crawl_lock: str | None = None  # the pin lasts until it "finished", or "forever"
    crawl_slots: int | None = None  # how many of its slots are pinned (None: all)


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsumerRow:
    """A named reader of the journal: everything up to *position* is acknowledged."""

    name: str
    position: int
    created_at: float
    acked_at: float | None
    lag: int  # entries after its position
