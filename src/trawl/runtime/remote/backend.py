"""A worker's claims and commits through a tracker server (runtime/backend.py's other way).

The tracker claims, commits and renews with the same engine verbs as a local worker; this
side turns each finished attempt's effects into data (runtime/remote/effects.py), settles
lapsed leases of its tasks as lost attempts with its own retry policy, and reads items for
its tasks' contexts through the tracker.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import msgspec

from trawl.engine import claim as engine_claim
from trawl.engine.commit import needs_preparing, prepare
from trawl.model import wire
from trawl.model.errors import AppLoadError
from trawl.model.records import AttemptResult, ClaimedJob, CommitReport, FailureInfo, ItemView
from trawl.model.states import Outcome
from trawl.runtime.app import TaskDef
from trawl.runtime.backend import Lane, Lease
from trawl.runtime.remote import effects
from trawl.runtime.remote.connection import Connection, RequestRefused
from trawl.runtime.settle import lost_result
from trawl.store.store import Store

log = logging.getLogger("trawl.remote")
T = TypeVar("T")


def client_version() -> str:
    try:
        return f"trawl {version('trawl')}"
    except PackageNotFoundError:
        return "trawl"


class RemoteReader:
    """A task's Context reads, through the tracker."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def get_item(self, alias: str) -> ItemView | None:
        found = await self.connection.request_raw("item", wire.ItemRequest(id=alias))
        return None if found is None else msgspec.convert(found, ItemView)

    async def get_metadata(self, task: str, alias: str) -> dict[str, Any] | None:
        request = wire.MetadataRequest(task=task, id=alias)
        found = await self.connection.request_raw("metadata", request)
        return None if found is None else msgspec.convert(found, dict[str, Any])

    async def with_store(self, fn: Callable[[Store], T]) -> T:
        raise effects.NotRemotable(
            "ctx.with_store needs the database: this task runs on a remote pipeline"
        )


class RemoteLane:
    def __init__(self, backend: RemoteBackend) -> None:
        self.backend = backend

    async def commit_and_claim(
        self, results: list[AttemptResult], limit: int, known: frozenset[int] | None
    ) -> tuple[CommitReport, engine_claim.ClaimBatch]:
        backend = self.backend
        held = None if known is None else sorted(known)

        async def send(attempts: list[wire.Attempt]) -> wire.ClaimReply:
            request = wire.ClaimRequest(limit=limit, results=attempts, known=held)
            return await backend.connection.request("claim", request, wire.ClaimReply)

        reply, failed = await backend.send_attempts(results, send)
        for job in reply.jobs:
            backend.remember(job)
        batch = engine_claim.ClaimBatch(jobs=list(reply.jobs), wake_at=reply.wake_at)
        return _report(reply.report, failed), batch

    async def sweep(self, defs: Mapping[str, TaskDef]) -> tuple[list[AttemptResult], CommitReport]:
        found = await self.backend.connection.request(
            "lapsed", wire.LapsedRequest(), wire.LapsedReply
        )
        lost = [
            lost_result(defs[j.job.task], j.job, j.owner) for j in found.jobs if j.job.task in defs
        ]
        if not lost:
            return lost, CommitReport()
        return lost, await self.backend.commit(lost)

    def now(self) -> float:
        return time.time() + self.backend.connection.offset


class RemoteBackend:
    """The tracker at *url* (``ws://host:port``), as pipeline *pipeline* with *token*."""

    def __init__(
        self,
        url: str,
        *,
        pipeline: str,
        token: str,
        owner: str,
        slots: int,
        disk_path: str = ".",
        on_advisory: Callable[[str, Any], None] = lambda kind, payload: None,
        capabilities: Sequence[str] = (),
    ) -> None:
        self.url, self.pipeline, self._token, self.owner = url, pipeline, token, owner
        self.slots, self.disk_path = slots, disk_path
        self.capabilities = list(capabilities)  # said in the hello (e.g. "browser")
        self._on_advisory = on_advisory
        self._wake: Callable[[], None] = lambda: None
        self.in_use: Callable[[], int] = lambda: 0  # slots busy, for pings
        self.connection = Connection(
            url,
            pipeline=pipeline,
            token=token,
            on_advisory=self._advised,
            in_use=lambda: self.in_use(),
            disk=self._disk,
        )
        self.reader = RemoteReader(self.connection)
        self._jobs: dict[int, dict[str, Any]] = {}  # each running job's data as claimed

    async def prepare(
        self, defs: Mapping[str, TaskDef], gates: Sequence[engine_claim.TaskGate]
    ) -> None:
        self.connection.hello = wire.Hello(
            v=wire.VERSION,
            protocol=wire.PROTOCOL,
            slots=self.slots,
            owner=self.owner,
            client=client_version(),
            tasks=[_task_spec(d, g) for d, g in zip(defs.values(), gates, strict=True)],
            capabilities=self.capabilities,
        )
        welcome = await self.connection.start()
        self._welcomed(welcome, defs)

    def _welcomed(self, welcome: wire.Welcome, defs: Mapping[str, TaskDef] | None = None) -> None:
        unrouted = sorted(set(defs or ()) - set(welcome.tasks))
        log.info(
            "pipeline %s on %s: %d slots, tasks %s%s",
            welcome.pipeline,
            self.url,
            welcome.slots,
            ", ".join(welcome.tasks) or "(none routed to it)",
            f"; not routed here: {', '.join(unrouted)}" if unrouted else "",
        )

    def _advised(self, kind: str, payload: Any) -> None:
        if kind in ("welcome", "routing"):
            self._welcomed(msgspec.convert(payload, wire.Welcome))
        elif kind == "drain":
            log.warning("the tracker drains this pipeline: it claims nothing more until undrained")
        elif kind in ("revoked", "disconnect", "refused"):
            log.warning("the tracker says %s: %s", kind, payload)
        self._on_advisory(kind, payload)
        self._wake()

    def _disk(self) -> tuple[int | None, int | None]:
        try:
            usage = shutil.disk_usage(self.disk_path)
        except OSError:
            return None, None
        return usage.free, usage.total

    def lanes(self) -> list[Lane]:
        return [RemoteLane(self)]

    def capacity(self) -> int | None:
        welcome = self.connection.welcome
        return None if welcome is None else welcome.slots

    async def commit(self, results: list[AttemptResult]) -> CommitReport:
        async def send(attempts: list[wire.Attempt]) -> wire.Report:
            request = wire.CommitRequest(results=attempts)
            return await self.connection.request("commit", request, wire.Report)

        return _report(*await self.send_attempts(results, send))

    async def renew(self, leases: Sequence[Lease]) -> set[int]:
        request = wire.RenewRequest(leases=[tuple(lease) for lease in leases])  # type: ignore[misc]
        reply = await self.connection.request("renew", request, wire.RenewReply)
        return set(reply.kept)

    async def recheck_clock(self) -> None:
        """Leases are the tracker's: its clock is the one that counts (see ``now``)."""

    async def upkeep(self) -> None:
        """The tracker keeps its database: nothing to do here."""

    def listen(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()

    # -- attempts on the wire -----------------------------------------------------------------

    def remember(self, job: ClaimedJob) -> None:
        """A copy of the job's data as claimed (a task may change ``ctx.data`` in place):
        update_data callbacks are diffed against it."""
        self._jobs[job.job_id] = copy.deepcopy(job.data)

    async def send_attempts(
        self, results: list[AttemptResult], send: Callable[[list[wire.Attempt]], Awaitable[T]]
    ) -> tuple[T, dict[int, str]]:
        """*results* on the wire through *send*, and the attempts sent as failures instead
        (job id -> why). An attempt whose effects cannot cross, or that the tracker
        refuses (it names ``results[N]``), is sent as a failure that applies nothing, so
        one bad attempt cannot hold back the others."""
        failed: dict[int, str] = {}
        if needs_preparing(results):  # durable here before the tracker records it
            await asyncio.to_thread(prepare, results)
        attempts = [await self._one(r, failed) for r in results]
        while True:
            try:
                return await send(attempts), failed
            except RequestRefused as refused:
                bad = _refused_index(refused, len(attempts))
                if bad is None:
                    raise
                log.warning(
                    "the tracker refused the attempt on %s: %s", results[bad].item_id, refused
                )
                failed[results[bad].job_id] = str(refused)
                failure = _failed(results[bad], "InvalidData", str(refused))
                attempts = [*attempts[:bad], effects.attempt(failure, []), *attempts[bad + 1 :]]

    async def _one(self, result: AttemptResult, failed: dict[int, str]) -> wire.Attempt:
        data = self._jobs.pop(result.job_id, None)
        applies = result.outcome is not Outcome.FAILURE or result.apply_on_failure
        if not applies or not result.effects:
            return effects.attempt(result, [])
        try:
            translation = effects.Translation(result.item_id, data, self.reader)
            translated = await translation.all(result.effects)
        except effects.NotRemotable as error:
            failed[result.job_id] = str(error)
            return effects.attempt(_failed(result, "NotRemotable", str(error)), [])
        return effects.attempt(result, translated)


def _failed(result: AttemptResult, kind: str, message: str) -> AttemptResult:
    return msgspec.structs.replace(
        result,
        outcome=Outcome.FAILURE,
        effects=(),
        result=None,
        failure=FailureInfo(error_type=kind, message=message),
        retry_delay=None,  # the same attempt would be refused again
    )


def _refused_index(refused: RequestRefused, count: int) -> int | None:
    field = refused.field or ""
    if refused.kind != "InvalidInput" or not field.startswith("results["):
        return None
    try:
        index = int(field[len("results[") : field.index("]")])
    except ValueError:
        return None
    return index if 0 <= index < count else None


def _report(report: wire.Report, failed: dict[int, str]) -> CommitReport:
    """The tracker's report; attempts sent as failures here count as failed effects."""
    effect_failures = {int(job): why for job, why in report.effect_failures.items()}
    committed = set(report.committed)
    effect_failures |= {job: why for job, why in failed.items() if job in committed}
    return CommitReport(
        committed=list(report.committed), stale=list(report.stale), effect_failures=effect_failures
    )


def _task_spec(d: TaskDef, gate: engine_claim.TaskGate) -> wire.TaskSpec:
    info = d.info()
    limits = []
    for lim in gate.limits:
        if lim.key is not None:
            raise AppLoadError(
                f"task {d.name!r} is subject to keyed rate limit {lim.name!r}: a keyed limit "
                "needs the app's key function at the claim, so it cannot run on a remote "
                "pipeline (run it with trawl worker --db, or make the limit unkeyed)"
            )
        limits.append(
            wire.LimitSpec(
                name=lim.name,
                rate=lim.rate,
                burst=lim.burst,
                tasks=None if lim.tasks is None else list(lim.tasks),
            )
        )
    return wire.TaskSpec(
        name=info.name,
        version=info.version,
        timeout=info.timeout,
        tags=list(info.tags),
        ttl=info.ttl,
        retries=info.retries,
        niceness=info.niceness,
        depends_on=list(info.depends_on),
        rerun_on_change=info.rerun_on_change,
        max_failures=info.max_failures,
        pipeline_tag=info.pipeline_tag,
        weights=gate.weights,
        limits=limits,
    )
