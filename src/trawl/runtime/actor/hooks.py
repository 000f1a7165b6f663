"""Firing an actor's hooks from a worker: ticks, job transitions and item events.

Which hooks any plugin implements is looked up once, so a worker with no plugins pays one
attribute test per job and step. Item events (and ``ctx.expire``) are read from the journal
rows each commit wrote, so they fire exactly for what was committed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from trawl.model.records import AttemptResult, ClaimedJob, CommitReport
from trawl.model.states import Journal, Outcome
from trawl.runtime.actor.spec import ActorInfo
from trawl.runtime.plugins import Plugins
from trawl.store import codec
from trawl.store.connection import Database

_BY_OUTCOME = {
    Outcome.SUCCESS: "trawl_job_done",
    Outcome.FAILURE: "trawl_job_failed",
    Outcome.RELEASED: "trawl_job_released",
    Outcome.DEFERRED: "trawl_job_deferred",
    Outcome.SKIPPED: "trawl_job_skipped",
}
_TICKS = ("trawl_actor_tick_start", "trawl_actor_tick_end", "trawl_actor_tick_exception")
_COMMITS = (*_BY_OUTCOME.values(), "trawl_job_stale")
_JOURNALED = {
    Journal.ITEM_CREATED.value: "trawl_item_created",
    Journal.ITEM_UPDATED.value: "trawl_item_updated",
    Journal.ITEM_RENAMED.value: "trawl_item_renamed",
    Journal.ITEM_MERGED.value: "trawl_item_merged",
    Journal.ITEM_DELETED.value: "trawl_item_deleted",
    Journal.JOB_EXPIRED.value: "trawl_job_expired",
}


class ActorHooks:
    """The hooks of one actor (or ``trawl worker``), bound to its :class:`ActorInfo`."""

    def __init__(self, plugins: Plugins, actor: ActorInfo) -> None:
        self.plugins = plugins
        self.actor = actor
        self.claims = plugins.implemented("trawl_job_claimed")
        self.ticks = plugins.implemented(*_TICKS)
        self.commits = plugins.implemented(*_COMMITS)
        self.journaled = plugins.implemented(*_JOURNALED.values())
        self._rows: deque[dict[str, Any]] = deque()  # filled on the database thread

    def tap(self, db: Database) -> None:
        """Collect the journal rows of every commit on *db*, if any hook wants them."""
        if self.journaled:
            db.on_commit = self._rows.extend

    def startup(self) -> None:
        self.plugins.call("trawl_actor_startup", actor=self.actor)

    def shutdown(self) -> None:
        self.plugins.call("trawl_actor_shutdown", actor=self.actor)

    def claimed(self, job: ClaimedJob) -> None:
        self.plugins.call("trawl_job_claimed", actor=self.actor, job=job)

    def tick_start(self, job: ClaimedJob) -> None:
        self.plugins.call("trawl_actor_tick_start", actor=self.actor, job=job)

    def tick_exception(self, job: ClaimedJob, error: BaseException) -> None:
        self.plugins.call("trawl_actor_tick_exception", actor=self.actor, job=job, exception=error)

    def tick_end(self, job: ClaimedJob, result: AttemptResult) -> None:
        self.plugins.call("trawl_actor_tick_end", actor=self.actor, job=job, result=result)

    def committed(self, results: Sequence[AttemptResult], report: CommitReport) -> None:
        """After a commit: item events in journal order, then each attempt's transition."""
        self._journal_events()
        if self.commits:
            transitions(self.plugins, self.actor, results, report)

    def _journal_events(self) -> None:
        while self._rows:
            row = self._rows.popleft()
            name = _JOURNALED.get(row["kind"])
            if name is not None:
                self.plugins.call(name, actor=self.actor, **_event_args(row))


def transitions(
    plugins: Plugins, actor: ActorInfo, results: Sequence[AttemptResult], report: CommitReport
) -> None:
    """Fire the job hook of every attempt in a commit: its transition, or stale."""
    by_id = {r.job_id: r for r in results}
    for job_id in report.committed:
        result = by_id[job_id]
        if job_id in report.effect_failures:
            error = report.effect_failures[job_id]
            plugins.call("trawl_job_failed", actor=actor, job=result, error=error)
        elif result.outcome is Outcome.FAILURE:
            error = result.failure.message if result.failure else "failed"
            plugins.call("trawl_job_failed", actor=actor, job=result, error=error)
        else:
            plugins.call(_BY_OUTCOME[result.outcome], actor=actor, job=result)
    for job_id in report.stale:
        plugins.call("trawl_job_stale", actor=actor, job=by_id[job_id])


def _event_args(row: dict[str, Any]) -> dict[str, Any]:
    kind, item_id, task = row["kind"], row["item_id"], row["task"]
    detail = codec.loads(row["detail"]) if row.get("detail") else {}
    if kind == Journal.JOB_EXPIRED.value:
        return {"item_id": item_id, "task": task}
    args: dict[str, Any] = {"item_id": item_id, "task": task}
    if kind == Journal.ITEM_RENAMED.value:
        args["old_id"] = detail.get("from")
    elif kind == Journal.ITEM_MERGED.value:
        args["merged_id"] = detail.get("from")
    return args
