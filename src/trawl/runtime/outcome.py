"""Turning how an attempt ended into what the commit writes: result hash, whether the run
was eventful, the next revisit, and when a failure may be retried."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

from trawl.engine import backoff, revisit
from trawl.model.records import AttemptResult, ClaimedJob, CommitReport, FailureInfo
from trawl.model.states import Outcome
from trawl.runtime.app import TaskDef
from trawl.runtime.context import Context, asks


def result_hash(result: str | None) -> str | None:
    if result is None:
        return None
    return hashlib.blake2b(result.encode(), digest_size=12).hexdigest()


def attempt_result(
    d: TaskDef,
    job: ClaimedJob,
    ctx: Context,
    outcome: Outcome,
    *,
    result: str | None = None,
    failure: FailureInfo | None = None,
    not_found: bool = False,
) -> AttemptResult:
    asked = asks(ctx)
    digest = result_hash(result)
    changed = asked.eventful
    if changed is None:
        changed = digest is not None and digest != job.result_hash
    ttl, offset = d.ttl, None
    policy = d.schedule.revisit
    if policy is not None and outcome is Outcome.SUCCESS:
        offset = revisit.next_offset(job.revisit_offset, changed)
        ttl = revisit.jittered(revisit.interval(policy, offset))
    return AttemptResult(
        job_id=job.job_id,
        item_id=job.item_id,
        task=job.task,
        attempt=job.attempt,
        outcome=outcome,
        version=d.version,
        ttl=ttl,
        result=result,
        effects=tuple(asked.effects) if outcome is not Outcome.RELEASED else (),
        failure=failure,
        # Only a failure waits to be retried (the commit ignores the delay otherwise).
        retry_delay=retry_delay(d, job, not_found=not_found)
        if outcome is Outcome.FAILURE
        else None,
        apply_on_failure=asked.allow_failure,
        result_hash=digest,
        revisit_offset=offset,
        not_found=not_found,
        changed=changed,
        defer_until=asked.defer_until if outcome is Outcome.DEFERRED else None,
    )


def unfinished_result(
    d: TaskDef,
    job: ClaimedJob,
    failure: FailureInfo | None,
    *,
    retry_delay: float | None = None,
) -> AttemptResult:
    """What the commit writes for an attempt that never returned (its process died, its
    lease lapsed): a failure with *failure*, else the job handed back; no result, no
    effects."""
    return AttemptResult(
        job_id=job.job_id,
        item_id=job.item_id,
        task=job.task,
        attempt=job.attempt,
        outcome=Outcome.RELEASED if failure is None else Outcome.FAILURE,
        version=d.version,
        ttl=d.ttl,
        failure=failure,
        retry_delay=retry_delay,
    )


def retry_delay(d: TaskDef, job: ClaimedJob, *, not_found: bool) -> float | None:
    """When a failed attempt may run again; ``None``: not until something changes."""
    cooldowns = d.schedule.cooldowns
    if not_found:
        return revisit.not_found_delay(cooldowns, job.not_found)
    delay = backoff.delay(job.fail_count + 1, d.retries, d.backoff)
    return cooldowns.exhausted if delay is None else delay


def due_again_in(
    results: Sequence[AttemptResult], report: CommitReport, now: float | None = None
) -> float:
    """How long until the last job that committing *results* put back for later (a retry,
    or a deferral: a crawl page waiting for its host, a task's ``ctx.defer``) comes due, in
    seconds (0.0: none). A worker or orchestrator that exits when idle waits that long: a
    job waiting for its retry or its turn is not finished."""
    # On every commit: the common case (nothing put back for later) builds nothing.
    later = [
        r
        for r in results
        if (r.outcome is Outcome.FAILURE and r.retry_delay)
        or (r.outcome is Outcome.DEFERRED and r.defer_until is not None)
    ]
    if not later:
        return 0.0
    committed = set(report.committed)
    now = time.time() if now is None else now
    return max(
        (_ahead(r, now) for r in later if r.job_id in committed),
        default=0.0,
    )


def _ahead(result: AttemptResult, now: float) -> float:
    if result.outcome is Outcome.DEFERRED:  # defer_until is a time, on the wall clock
        return max(0.0, (result.defer_until or now) - now)
    return result.retry_delay or 0.0
