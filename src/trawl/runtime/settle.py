"""Settling attempts that ended without a commit: the jobs an actor still held when it
died (at once, rather than when their leases run out), and leases that lapsed (a worker
killed, crashed or stopped: a *lost* attempt, counted against the job's retries).

The commit is the ordinary fenced one (``id``, ``attempt``, ``status = 'running'``): if
the actor committed an attempt just before it died, the orchestrator's commit for the same
attempt is stale and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from trawl.engine.commit import commit
from trawl.model.records import AttemptResult, ClaimedJob, CommitReport, FailureInfo
from trawl.runtime.app import TaskDef
from trawl.runtime.outcome import retry_delay, unfinished_result
from trawl.store.store import Store


class Death(StrEnum):
    """How an actor ended, as far as the jobs it held are concerned."""

    CLEAN = "clean"  # it exited by itself: anything left is handed back
    STOPPED = "stopped"  # killed by the orchestrator at shutdown: handed back
    STALLED = "stalled"  # killed because its event loop stopped: the attempts timed out
    CRASHED = "crashed"  # died on its own: the attempts failed, retried at once
    LOST = "lost"  # its lease lapsed without a commit: failed, retried after a backoff


class ActorDied(Exception):
    """The actor process running the attempt died."""


LOST = "lost"  # the failure kind (error type) of a lapsed lease
SWEEP_BATCH = 100


def sweep_lapsed(
    store: Store, defs: Mapping[str, TaskDef]
) -> tuple[list[AttemptResult], CommitReport]:
    """Settle lapsed leases of *defs*' tasks as lost attempts (fenced, so a late commit of
    the original worker or a second sweeper changes nothing twice)."""
    found = store.lapsed(list(defs), SWEEP_BATCH)
    results = [lost_result(defs[job.task], job, owner) for job, owner in found]
    if not results:
        return results, CommitReport()
    return results, commit(store, results)


def lost_result(task: TaskDef, job: ClaimedJob, owner: str | None) -> AttemptResult:
    """*job*'s attempt as lost: its lease lapsed without a commit."""
    why = (
        f"attempt {job.attempt} of worker {owner or '?'} ended without a commit: its lease"
        " lapsed (the process was killed, crashed or stalled)"
    )
    failure = FailureInfo(error_type=LOST, message=why)
    return unfinished_result(
        task, job, failure, retry_delay=retry_delay(task, job, not_found=False)
    )


def held_jobs(store: Store, task: str, owner: str) -> list[ClaimedJob]:
    return store.queues.held(task, owner)


def settle(
    store: Store, task: TaskDef, jobs: Sequence[ClaimedJob], death: Death, why: str
) -> tuple[list[AttemptResult], CommitReport]:
    """Commit what *death* means for each of *jobs*; returns the attempts and the report."""
    results = [_result(task, job, death, why) for job in jobs]
    if not results:
        return results, CommitReport()
    return results, commit(store, results)


def _result(task: TaskDef, job: ClaimedJob, death: Death, why: str) -> AttemptResult:
    if death in (Death.CLEAN, Death.STOPPED):
        return unfinished_result(task, job, None)
    error = "TaskTimeout" if death is Death.STALLED else ActorDied.__name__
    delay = retry_delay(task, job, not_found=False)
    if death is Death.CRASHED and job.fail_count < task.retries:
        delay = 0.0  # not the job's doing, most likely: run it again at once
    failure = FailureInfo(error_type=error, message=why)
    return unfinished_result(task, job, failure, retry_delay=delay)
