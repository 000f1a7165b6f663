"""Firing an actor's hooks from a worker: ticks, job transitions and item events.

Which hooks any plugin implements is looked up once, so a worker with no plugins pays one
attribute test per job and step. Item events (and ``ctx.expire``) are read from the journal
rows each commit wrote, so they fire exactly for what was committed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from trawl.model.records import AttemptResult, ClaimedJob, CommitReport
from trawl.model.states import Journal, Outcome
from trawl.runtime import hookspecs as hs
from trawl.runtime.actor.spec import ActorInfo
from trawl.runtime.plugins import Plugins
from trawl.store import codec
from trawl.store.store import Store


class _JobHook(Protocol):
    def __call__(self, actor: ActorInfo, job: AttemptResult) -> None: ...


# A failure's hook also says why (see transitions()).
_BY_OUTCOME: dict[Outcome, _JobHook] = {
    Outcome.SUCCESS: hs.trawl_job_done,
    Outcome.RELEASED: hs.trawl_job_released,
    Outcome.DEFERRED: hs.trawl_job_deferred,
    Outcome.SKIPPED: hs.trawl_job_skipped,
}
_TICKS: tuple[Callable[..., None], ...] = (
    hs.trawl_actor_tick_start,
    hs.trawl_actor_tick_end,
    hs.trawl_actor_tick_exception,
)
_COMMITS: tuple[Callable[..., None], ...] = (
    *_BY_OUTCOME.values(),
    hs.trawl_job_failed,
    hs.trawl_job_stale,
)
# Journal rows whose kinds plugins hear of; each hook takes its own arguments (_event_args).
_JOURNALED: dict[str, Callable[..., None]] = {
    Journal.ITEM_CREATED.value: hs.trawl_item_created,
    Journal.ITEM_UPDATED.value: hs.trawl_item_updated,
    Journal.ITEM_RENAMED.value: hs.trawl_item_renamed,
    Journal.ITEM_MERGED.value: hs.trawl_item_merged,
    Journal.ITEM_DELETED.value: hs.trawl_item_deleted,
    Journal.JOB_EXPIRED.value: hs.trawl_job_expired,
}


class ActorHooks:
    """The hooks of one actor (or ``trawl worker``), bound to its :class:`ActorInfo`."""

    def __init__(self, plugins: Plugins, actor: ActorInfo) -> None:
        self.plugins = plugins
        self.actor = actor
        self.claims = plugins.implemented(hs.trawl_job_claimed)
        self.ticks = plugins.implemented(*_TICKS)
        self.commits = plugins.implemented(*_COMMITS)
        self.journaled = plugins.implemented(*_JOURNALED.values())
        self._rows: deque[dict[str, Any]] = deque()  # filled on the database thread

    def tap(self, store: Store) -> None:
        """Collect the journal rows of every commit on *store*, if any hook wants them."""
        if self.journaled:
            store.on_commit(self._rows.extend)

    def startup(self) -> None:
        self.plugins.fire(hs.trawl_actor_startup, actor=self.actor)

    def shutdown(self) -> None:
        self.plugins.fire(hs.trawl_actor_shutdown, actor=self.actor)

    def claimed(self, job: ClaimedJob) -> None:
        self.plugins.fire(hs.trawl_job_claimed, actor=self.actor, job=job)

    def lease_lost(self, job: ClaimedJob) -> None:
        self.plugins.fire(hs.trawl_job_lease_lost, actor=self.actor, job=job)

    def tick_start(self, job: ClaimedJob) -> None:
        self.plugins.fire(hs.trawl_actor_tick_start, actor=self.actor, job=job)

    def tick_exception(self, job: ClaimedJob, error: BaseException) -> None:
        self.plugins.fire(hs.trawl_actor_tick_exception, actor=self.actor, job=job, exception=error)

    def tick_end(self, job: ClaimedJob, result: AttemptResult) -> None:
        self.plugins.fire(hs.trawl_actor_tick_end, actor=self.actor, job=job, result=result)

    def committed(self, results: Sequence[AttemptResult], report: CommitReport) -> None:
        """After a commit: item events in journal order, then each attempt's transition."""
        self._journal_events()
        if self.commits:
            transitions(self.plugins, self.actor, results, report)

    def _journal_events(self) -> None:
        while self._rows:
            row = self._rows.popleft()
            hook = _JOURNALED.get(row["kind"])
            if hook is not None:
                self.plugins.fire(hook, actor=self.actor, **_event_args(row))


def transitions(
    plugins: Plugins, actor: ActorInfo, results: Sequence[AttemptResult], report: CommitReport
) -> None:
    """Fire the job hook of every attempt in a commit: its transition, or stale."""
    by_id = {r.job_id: r for r in results}
    for job_id in report.committed:
        result = by_id[job_id]
        if job_id in report.effect_failures:
            error = report.effect_failures[job_id]
            plugins.fire(hs.trawl_job_failed, actor=actor, job=result, error=error)
        elif result.outcome is Outcome.FAILURE:
            error = result.failure.message if result.failure else "failed"
            plugins.fire(hs.trawl_job_failed, actor=actor, job=result, error=error)
        else:
            plugins.fire(_BY_OUTCOME[result.outcome], actor=actor, job=result)
    for job_id in report.stale:
        plugins.fire(hs.trawl_job_stale, actor=actor, job=by_id[job_id])


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
