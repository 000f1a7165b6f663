"""Every hook a trawl plugin can implement, each with its one-line contract.

Hooks are notifications: their return values are ignored, and each implementation is called
on its own, so one that raises is logged and the others (and the work) carry on. They run
on the thread of the loop that fires them: keep them quick, or hand the work to a thread.
docs/plugins.md documents each hook; a test fails if one is missing there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import pluggy

from trawl.model.records import AttemptResult, ClaimedJob, TaskCounts

if TYPE_CHECKING:
    from trawl.runtime.actor.spec import ActorInfo, ActorType, QueueInfo
    from trawl.runtime.app import App

hookspec = pluggy.HookspecMarker("trawl")


# -- what the orchestrator hooks hand a plugin (read-only; exported as trawl.OrchestratorView)


class RunningActor(Protocol):
    """An actor process the orchestrator started and has not yet reaped."""

    @property
    def info(self) -> ActorInfo: ...
    @property
    def started(self) -> float:
        """When it started (``time.monotonic()`` of the orchestrator)."""
        ...

    @property
    def last_beat(self) -> float | None:
        """When its event loop last said it was alive (monotonic), if it has yet."""
        ...


class Counters(Protocol):
    def snapshot(self) -> dict[str, int]: ...


class OrchestratorView(Protocol):
    """What an orchestrator hook's ``orchestrator`` lets a plugin read."""

    @property
    def pid(self) -> int: ...
    @property
    def url(self) -> str: ...
    @property
    def app(self) -> App: ...
    @property
    def actor_types(self) -> Mapping[str, ActorType]: ...
    @property
    def max_actors(self) -> int: ...
    @property
    def queues(self) -> Mapping[str, QueueInfo]:
        """The last tick's queues, by actor type."""
        ...

    @property
    def actors(self) -> Mapping[int, RunningActor]:
        """The actors alive, by pid."""
        ...

    @property
    def orphans(self) -> Mapping[str, int]:
        """Due jobs of tasks this orchestrator runs no actor type for, by task."""
        ...

    @property
    def metrics(self) -> Counters: ...
    def status(self, max_age: float = 2.0) -> list[TaskCounts]:
        """`trawl status` counts, at most *max_age* seconds old."""
        ...


# -- the orchestrator (in the `trawl run` process) ------------------------------------------


@hookspec
def trawl_orchestrator_startup(orchestrator: OrchestratorView) -> None:
    """The orchestrator holds the collection's lock and registered the app; no actor runs yet."""


@hookspec
def trawl_orchestrator_tick(
    orchestrator: OrchestratorView,
    queues: Mapping[str, QueueInfo],
    actors: Sequence[ActorInfo],
) -> None:
    """Each loop iteration, after reaping and reading the queues, before spawning actors."""


@hookspec
def trawl_orchestrator_idle(orchestrator: OrchestratorView) -> None:
    """Each loop iteration on which no actor type has due work."""


@hookspec
def trawl_orchestrator_shutdown(orchestrator: OrchestratorView) -> None:
    """Every actor has exited (or was killed, its leases released); the lock is still held."""


@hookspec
def trawl_actor_spawned(orchestrator: OrchestratorView, actor: ActorInfo) -> None:
    """The orchestrator started an actor process (called in the orchestrator)."""


@hookspec
def trawl_actor_exited(
    orchestrator: OrchestratorView, actor: ActorInfo, returncode: int, reason: str
) -> None:
    """An actor process ended and was reaped; *reason* is idle, replaced, crashed or killed."""


# -- an actor (in each actor process, and in `trawl worker`) ---------------------------------


@hookspec
def trawl_actor_startup(actor: ActorInfo) -> None:
    """The actor is ready (its on_startup has run) and is about to claim its first jobs."""


@hookspec
def trawl_actor_tick_start(actor: ActorInfo, job: ClaimedJob) -> None:
    """An attempt of *job* is about to run."""


@hookspec
def trawl_actor_tick_exception(actor: ActorInfo, job: ClaimedJob, exception: BaseException) -> None:
    """The attempt raised *exception* or ran past its timeout (a ``TaskTimeout``)."""


@hookspec
def trawl_actor_tick_end(actor: ActorInfo, job: ClaimedJob, result: AttemptResult) -> None:
    """The attempt ended, however it ended; *result* is what goes to the commit."""


@hookspec
def trawl_actor_shutdown(actor: ActorInfo) -> None:
    """The actor stopped claiming and committed everything; its on_shutdown runs next."""


# -- job transitions (in the process that commits them) --------------------------------------


@hookspec
def trawl_job_claimed(actor: ActorInfo, job: ClaimedJob) -> None:
    """*job* was leased to *actor* (queued, failed or expired -> running)."""


@hookspec
def trawl_job_done(actor: ActorInfo, job: AttemptResult) -> None:
    """The attempt's success was committed (running -> done), with its effects."""


@hookspec
def trawl_job_failed(actor: ActorInfo, job: AttemptResult, error: str) -> None:
    """The attempt's failure was committed (running -> failed); *error* says why."""


@hookspec
def trawl_job_released(actor: ActorInfo, job: AttemptResult) -> None:
    """The attempt was handed back unfinished, due again at once (running -> queued)."""


@hookspec
def trawl_job_deferred(actor: ActorInfo, job: AttemptResult) -> None:
    """The task deferred the job with ``ctx.defer`` (running -> queued, due later)."""


@hookspec
def trawl_job_skipped(actor: ActorInfo, job: AttemptResult) -> None:
    """The task set the job aside with ``ctx.skip`` (running -> skipped)."""


@hookspec
def trawl_job_stale(actor: ActorInfo, job: AttemptResult) -> None:
    """The attempt's commit was rejected: its lease was lost and the job claimed again."""


@hookspec
def trawl_job_lease_lost(actor: ActorInfo, job: ClaimedJob) -> None:
    """A renewal found *job*'s lease gone while the attempt ran; its commit will be stale."""


@hookspec
def trawl_job_expired(actor: ActorInfo, item_id: str, task: str) -> None:
    """A committed ``ctx.expire`` made the result of *task* on *item_id* due again now."""


# -- items (in the process that commits the change) ------------------------------------------


@hookspec
def trawl_item_created(actor: ActorInfo, item_id: str, task: str | None) -> None:
    """A commit created item *item_id* (``ctx.create_item``)."""


@hookspec
def trawl_item_updated(actor: ActorInfo, item_id: str, task: str | None) -> None:
    """A commit changed the data of item *item_id*."""


@hookspec
def trawl_item_renamed(actor: ActorInfo, item_id: str, old_id: str, task: str | None) -> None:
    """A commit renamed item *old_id* to *item_id* (the old id stays an alias)."""


@hookspec
def trawl_item_merged(actor: ActorInfo, item_id: str, merged_id: str, task: str | None) -> None:
    """A commit merged item *merged_id* into *item_id* (after its update and the deletion)."""


@hookspec
def trawl_item_deleted(actor: ActorInfo, item_id: str, task: str | None) -> None:
    """A commit deleted item *item_id*."""
