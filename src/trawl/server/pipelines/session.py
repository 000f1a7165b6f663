"""A remote pipeline's session: it claims, commits, renews and reads on the pipeline's
behalf with the same engine verbs a local worker uses, and tells the pipeline when an
operator drains, disconnects or re-routes it.

Every lease a session takes is held in the pipeline's name (``pipeline:<id>:<owner>``), so
a pipeline can renew and commit only attempts it was given, even from its next session
after a reconnect. A commit repeated after a reconnect (its reply was lost) finds its
attempt already committed and is answered as committed, never applied twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, ClassVar

import msgspec

from trawl.crawl import operations
from trawl.crawl.blocks import RETRY_AFTER_MAX
from trawl.crawl.browser.chromium import BROWSER
from trawl.crawl.politeness import (
    Ask,
    Gate,
    Plan,
    block_host,
    host_failed,
    pace_host,
    store_robots,
)
from trawl.crawl.port import Batcher, payload_batcher
from trawl.crawl.remote import plan_to_wire
from trawl.crawl.urls import page_id
from trawl.engine import claim as engine_claim
from trawl.live import Conversation, Session, action, daemon
from trawl.model import wire
from trawl.model.errors import DatabaseUnavailable, InvalidInput, TrawlError
from trawl.model.limits import Limit
from trawl.model.records import AttemptResult, ClaimedJob, CommitReport, PipelineRow, TaskInfo
from trawl.runtime.backend import commit_and_claim
from trawl.server.pipelines.effects import BadAttempt, CustomDecoder, attempt_result
from trawl.server.pipelines.routed import RoutedCrawls
from trawl.server.pipelines.routing import Routing, limit
from trawl.server.stores import Stores
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

log = logging.getLogger("trawl.pipelines")

WATCH_EVERY = 10.0  # seconds between re-reads of the pipeline's row (revoked? re-routed?)
SERVICE = "pipeline/{}"  # the registry name a pipeline's session offers
EVERY = "pipelines"  # and the name every pipeline's session offers
UNPIN_EVERY = 5.0  # seconds at least between counts of whether a pinned crawl finished
MAX_PACE = 60.0  # the longest spacing a pipeline may ask between a host's sub-requests


class PipelineSession(Session):
    """One per connected pipeline (``trawl serve`` makes a subclass bound to its stores)."""

    type = "pipeline"
    protocol = wire.VERSION
    stores: ClassVar[Stores]
    customs: ClassVar[Mapping[str, CustomDecoder]] = {}
    watch_every: ClassVar[float] = WATCH_EVERY

    async def on_start(self) -> None:
        self.row: PipelineRow = self.identity
        self.spec: wire.Hello = self.hello
        self.owner = f"pipeline:{self.row.id}:{self.spec.owner}"
        self.routing = Routing(self.spec, self.row)
        self.gate = Gate()  # rulesets and robots.txt cached for this pipeline's fetches
        # A pipeline's fetches ask for plans and first copies a page at a time; those that
        # wait together are answered in one transaction or query, as a worker's own are.
        self._plans = Batcher(self._begin_many, f"gate of pipeline {self.row.id}")
        self._payloads = payload_batcher()
        self._routed = RoutedCrawls()  # the crawls its claims take pages of
        self._unpin_after = 0.0  # monotonic: when its pinned crawl may be counted again
        infos, limits = _registrations(self.spec.tasks)
        await self.stores.run(partial(_register, infos=infos, limits=limits))
        await self._supersede()
        await self.ctx.register(SERVICE.format(self.row.id))
        await self.ctx.register(EVERY)
        await self.stores.run(
            lambda s: s.pipelines.connected(self.row.id, self.ctx.node, self.spec.client, s.clock())
        )
        log.info(
            "pipeline %s connected (%s, %d slots, tasks: %s)",
            self.row.id,
            self.spec.client or "unknown client",
            self.routing.slots,
            ", ".join(self.routing.tasks) or "none routed to it",
        )
        await self.push("welcome", self._welcome())

    async def on_stop(self) -> None:
        await self._plans.close()
        await self._payloads.close()
        try:
            await self.stores.run(lambda s: s.pipelines.disconnected(self.row.id, self.ctx.node))
        except DatabaseUnavailable:
            log.warning("pipeline %s: could not record its disconnect", self.row.id)
        log.info("pipeline %s disconnected", self.row.id)

    def _welcome(self) -> wire.Welcome:
        return wire.Welcome(
            pipeline=self.row.id,
            session=self.ctx.address,
            slots=self.routing.slots,
            tasks=list(self.routing.tasks),
            ping_every=wire.PING_EVERY,
            time=time.time(),
            draining=self.row.draining,
        )

    async def _supersede(self) -> None:
        """A pipeline has one session: an older one (a connection its pipeline gave up on)
        is told to go."""
        for address in self.ctx.lookup_all(SERVICE.format(self.row.id)):
            if address != self.ctx.address:
                try:
                    await self.ctx.send(address, "superseded", self.ctx.address)
                except Exception:
                    log.debug("pipeline %s: old session %s already gone", self.row.id, address)

    # -- requests ---------------------------------------------------------------------------

    @action(client=True, concurrent=True)
    async def claim(self, request: wire.ClaimRequest, conv: Conversation) -> None:
        await self._answer(conv, self._claim, request)

    @action(client=True, concurrent=True)
    async def commit(self, request: wire.CommitRequest, conv: Conversation) -> None:
        claim = wire.ClaimRequest(limit=0, results=request.results)
        await self._answer(conv, lambda: self._claim(claim, report_only=True))

    @action(client=True, concurrent=True)
    async def renew(self, request: wire.RenewRequest, conv: Conversation) -> None:
        await self._answer(conv, self._renew, request)

    @action(client=True, concurrent=True)
    async def lapsed(self, request: wire.LapsedRequest, conv: Conversation) -> None:
        await self._answer(conv, self._lapsed, request)

    @action(client=True, concurrent=True)
    async def item(self, request: wire.ItemRequest, conv: Conversation) -> None:
        await self._answer(conv, lambda: self.stores.run(lambda s: s.get_item(request.id)))

    @action(client=True, concurrent=True)
    async def metadata(self, request: wire.MetadataRequest, conv: Conversation) -> None:
        await self._answer(
            conv, lambda: self.stores.run(lambda s: s.get_metadata(request.task, request.id))
        )

    @action(client=True, concurrent=True)
    async def ping(self, request: wire.PingRequest, conv: Conversation) -> None:
        await self._answer(conv, self._ping, request)

    @action(client=True)
    async def clock(self, request: wire.ClockRequest) -> Any:
        return msgspec.to_builtins(wire.PingReply(time=time.time()))

    async def _answer(
        self, conv: Conversation, fn: Callable[..., Awaitable[Any]], *args: Any
    ) -> None:
        """Reply with what *fn* gives, or with an error naming what was wrong: a request
        that fails never ends the session."""
        try:
            payload = await fn(*args)
        except BadAttempt as error:
            await conv.fail(f"InvalidInput: {error} - at `$.{error.field}`")
            return
        except DatabaseUnavailable as error:
            await conv.fail(f"Unavailable: {error}")
            return
        except TrawlError as error:
            await conv.fail(f"{type(error).__name__}: {error}")
            return
        except Exception as error:
            # A fault of the tracker's, not of the request: logged here in full, and
            # answered as unavailable so the pipeline waits and asks again instead of
            # giving up its running tasks.
            log.exception("pipeline %s: a request failed on the tracker", self.row.id)
            await conv.fail(
                f"Unavailable: the tracker failed ({type(error).__name__}; see its log)"
            )
            return
        await conv.reply(msgspec.to_builtins(payload))

    async def _claim(self, request: wire.ClaimRequest, report_only: bool = False) -> Any:
        results = [
            attempt_result(a, self.customs, f"results[{n}]") for n, a in enumerate(request.results)
        ]
        limit = 0 if self.routing.draining else min(request.limit, self.routing.slots)
        known = frozenset(request.known) if request.known is not None else None
        work = partial(self._commit_and_claim, results=results, limit=limit, known=known)
        report, batch = await self.stores.run(work)
        if report_only:
            return report
        return wire.ClaimReply(report=report, jobs=batch.jobs, wake_at=batch.wake_at)

    def _commit_and_claim(
        self,
        store: Store,
        *,
        results: list[AttemptResult],
        limit: int,
        known: frozenset[int] | None,
    ) -> tuple[wire.Report, engine_claim.ClaimBatch]:
        """On a connection of the server's: only attempts leased to this pipeline commit
        (checked in the commit's transaction); one it committed before is answered as
        committed (a repeat), others as stale."""
        others: list[tuple[int, int]] = []

        def fence(store: Store, results: list[AttemptResult]) -> list[AttemptResult]:
            owned = store.queues.owned([r.job_id for r in results], self.owner)
            others[:] = [(r.job_id, r.attempt) for r in results if r.job_id not in owned]
            return [r for r in results if r.job_id in owned]

        routing = self.routing
        report, batch = commit_and_claim(
            store,
            results,
            limit if routing.tasks else 0,
            known,
            partial(self._lease, routing=routing),
            routing.tasks,
            self.owner,
            fence,
        )
        # After the COMMIT: a job leased to someone else is never this commit's to change.
        repeated = store.queues.committed_attempts(others)
        return _report(report, repeated, [job for job, _ in others if job not in repeated]), batch

    def _lease(self, store: Store, limit: int, *, routing: Routing) -> engine_claim.Claimed:
        """The routed tasks' due jobs, then crawl pages: the pinned crawl's for the slots
        pinned to it (held for it even when it has nothing due), routed crawls' for the
        rest. Read after the COMMIT: with no pages to fill the rest of the batch with, the
        tasks' claim goes out with it (``claim_later``)."""
        if routing.fetch is None:
            return engine_claim.claim_later(store, routing.gates, limit, self.owner)
        batch = engine_claim.ClaimBatch(jobs=[])
        if routing.gates:
            batch = engine_claim.claim(store, routing.gates, limit, self.owner)
        room = limit - len(batch.jobs)
        if room <= 0:
            return lambda: batch
        routed = self._routed.of(store, routing)
        pages: list[ClaimedJob] = []
        if routing.pinned is not None:
            held = store.queues.held_pages(FETCH_TASK, self.owner, routing.pinned)
            free = max(0, routing.pinned_slots - held)
            timeout = routing.fetch.timeout
            pages = store.claim_pages(
                FETCH_TASK, routed.pinned, timeout, min(room, free), self.owner
            )
            if not pages and routing.lock == "finished" and held == 0:
                self._unpin_finished(store, routing.pinned)
            room -= free
        if room > 0:
            pages += store.claim_pages(
                FETCH_TASK, routed.crawls, routing.fetch.timeout, room, self.owner
            )
        leased = engine_claim.ClaimBatch(jobs=batch.jobs + pages, wake_at=batch.wake_at)
        return lambda: leased

    def _unpin_finished(self, store: Store, crawl_id: int) -> None:
        """A pin until the crawl finishes ends when it has: the pipeline is routed again.

        Whether it has is a count of the crawl's pages, which grows with the crawl (64 ms at
        25,000 pages, 28 s at 10 million: docs/scaling.md), and a pinned crawl whose pages
        wait for their hosts' delays has nothing to claim at most claims. So it is counted
        at most every UNPIN_EVERY seconds, or ten times as long as the last count took."""
        started = time.monotonic()
        if started < self._unpin_after:
            return
        try:
            finished = operations.status(store, crawl_id) == operations.FINISHED
        except operations.CrawlNotFound:
            finished = True
        finally:
            ended = time.monotonic()
            self._unpin_after = ended + max(UNPIN_EVERY, 10 * (ended - started))
        if finished:
            row = store.pipelines.pin(self.row.id, None)
            self.row, self.routing = row, Routing(self.spec, row)
            log.info("pipeline %s: crawl %d finished, its pin is lifted", self.row.id, crawl_id)

    async def _renew(self, request: wire.RenewRequest) -> wire.RenewReply:
        def renew(store: Store) -> set[int]:
            owned = store.queues.owned([job for job, _, _ in request.leases], self.owner)
            return store.renew([lease for lease in request.leases if lease[0] in owned])

        return wire.RenewReply(kept=sorted(await self.stores.run(renew)))

    async def _lapsed(self, request: wire.LapsedRequest) -> wire.LapsedReply:
        found = await self.stores.run(lambda s: s.lapsed(list(self.routing.tasks), request.limit))
        return wire.LapsedReply(jobs=[wire.LapsedJob(job=job, owner=who) for job, who in found])

    async def _ping(self, request: wire.PingRequest) -> wire.PingReply:
        await self.stores.run(
            lambda s: s.pipelines.checkin(
                self.row.id,
                s.clock(),
                in_use=request.in_use,
                free=request.disk_free,
                total=request.disk_total,
            )
        )
        return wire.PingReply(time=time.time())

    # -- crawling: the politeness gate, run here for the pipeline's fetches ---------------------

    @action("crawl.begin", client=True, concurrent=True)
    async def crawl_begin(self, request: wire.CrawlBeginRequest, conv: Conversation) -> None:
        await self._answer(conv, self._crawl_begin, request)

    @action("crawl.robots", client=True, concurrent=True)
    async def crawl_robots(self, request: wire.RobotsRequest, conv: Conversation) -> None:
        await self._answer(conv, self._crawl_robots, request)

    @action("crawl.block", client=True, concurrent=True)
    async def crawl_block(self, request: wire.BlockRequest, conv: Conversation) -> None:
        until = min(request.until, time.time() + RETRY_AFTER_MAX)  # a block ends
        await self._answer(
            conv, lambda: self.stores.run(lambda s: block_host(s, request.host, until))
        )

    @action("crawl.host_failed", client=True, concurrent=True)
    async def crawl_host_failed(self, request: wire.HostFailedRequest, conv: Conversation) -> None:
        async def failed() -> wire.HostFailedReply:
            until = await self.stores.run(
                lambda s: host_failed(
                    s, request.host, request.grace, crawl_id=request.crawl, url=request.url
                )
            )
            return wire.HostFailedReply(until=until)

        await self._answer(conv, failed)

    @action("crawl.pace", client=True, concurrent=True)
    async def crawl_pace(self, request: wire.PaceRequest, conv: Conversation) -> None:
        async def pace() -> wire.PaceReply:
            delay = min(request.delay, MAX_PACE)  # a pipeline cannot stall a host for all
            start = await self.stores.run(
                lambda s: pace_host(s, request.host, delay, request.after, request.lead)
            )
            return wire.PaceReply(start=start)

        await self._answer(conv, pace)

    @action("crawl.payloads", client=True, concurrent=True)
    async def crawl_payloads(self, request: wire.PayloadsRequest, conv: Conversation) -> None:
        async def payloads() -> wire.PayloadsReply:
            digest = request.digest
            if digest is None:
                found = await self.stores.run(lambda s: s.crawls.payloads(request.crawl))
                return wire.PayloadsReply(payloads=found)
            first = await self._payloads.ask(self.stores.run, (request.crawl, digest))
            return wire.PayloadsReply(payloads={} if first is None else {digest: first})

        await self._answer(conv, payloads)

    async def _crawl_begin(self, request: wire.CrawlBeginRequest) -> wire.CrawlPlan:
        if page_id(request.crawl, request.url) != request.item_id:
            raise InvalidInput(
                f"{request.item_id!r} is not the page {request.url!r} of crawl {request.crawl}"
            )

        return plan_to_wire(await self._plans.ask(self.stores.run, request))

    def _begin_many(self, store: Store, requests: list[wire.CrawlBeginRequest]) -> list[Plan]:
        """Plans for the pipeline's pages whose asks wait together, in one transaction (as
        a worker's own are, crawl/port.py): each a page this pipeline holds."""
        attempts = [(r.item_id, r.attempt) for r in requests]
        asks = [
            Ask(
                crawl_id=r.crawl,
                url=r.url,
                item_id=r.item_id,
                attempt=r.attempt,
                finished=tuple((str(item), attempt) for item, attempt in r.finished),
                lead=r.lead,
            )
            for r in requests
        ]
        return self.gate.begin_many(
            store,
            asks,
            browser=BROWSER in self.spec.capabilities,
            check=partial(self._check_holding, store, attempts),  # in the plans' transaction
        )

    async def _crawl_robots(self, request: wire.RobotsRequest) -> None:
        def keep(store: Store) -> None:
            self._holding(store, [(request.item_id, request.attempt)])
            robots = (request.status, request.body)
            store_robots(
                store, request.host, robots, request.not_before, request.item_id, request.attempt
            )

        await self.stores.run(keep)

    def _holding(self, store: Store, attempts: list[tuple[str, int]]) -> None:
        """Raise InvalidInput unless this pipeline holds the lease of each (page, attempt)."""
        with store.read():
            self._check_holding(store, attempts)

    def _check_holding(self, store: Store, attempts: list[tuple[str, int]]) -> None:
        """:meth:`_holding` in the caller's transaction."""
        held = store.queues.holding(FETCH_TASK, self.owner, [item for item, _ in attempts])
        for item_id, attempt in attempts:
            if held.get(item_id) != attempt:
                raise InvalidInput(
                    f"attempt {attempt} at {item_id!r} is not leased to this pipeline"
                )

    # -- what operators and other sessions say ------------------------------------------------

    @action()
    async def superseded(self, by: str) -> None:
        await self.push("disconnect", {"reason": f"a newer session of this pipeline ({by})"})
        self.ctx.stop()

    @action()
    async def disconnect(self, reason: str) -> None:
        await self.push("disconnect", {"reason": reason})
        self.ctx.stop()

    @action()
    async def refresh(self, reason: str) -> None:
        """The pipeline's row changed (an operator): read it now, not at the next watch."""
        await self._reread()

    @action()
    async def rules(self, change: dict[str, int]) -> None:
        """A crawl's rules changed: the pipeline's next plans carry them; it is told."""
        await self.push("rules", change)

    @daemon()
    async def watch(self) -> None:
        # A loop, not a daemon restarted each time it returns or fails: returns and failures
        # count as restarts, and five within a minute give the daemon up. Returning, it
        # stopped seeing its token rotated or its pipeline deleted about a minute into every
        # session; failing, it stopped after a database outage of a minute or so, for the rest
        # of the session. So a read that fails is tried again at the next watch.
        down_since: float | None = None
        while True:
            await asyncio.sleep(self.watch_every)
            try:
                row = await self._read_row()
            except DatabaseUnavailable as error:
                if down_since is None:
                    down_since = time.monotonic()
                    log.warning(
                        "pipeline %s: cannot re-read its row (%s); trying again every %gs",
                        self.row.id,
                        error,
                        self.watch_every,
                    )
                continue
            if down_since is not None:
                log.info(
                    "pipeline %s: its row is read again, after %.0fs",
                    self.row.id,
                    time.monotonic() - down_since,
                )
                down_since = None
            # After the recovery is logged: what the row says may close the session.
            await self._apply(row)

    async def _reread(self) -> None:
        await self._apply(await self._read_row())

    async def _read_row(self) -> PipelineRow | None:
        return await self.stores.run(lambda s: s.pipelines.get(self.row.id))

    async def _apply(self, row: PipelineRow | None) -> None:
        if row is None or row.token_rotated_at != self.row.token_rotated_at:
            why = "deleted" if row is None else "given a new token"
            log.info("pipeline %s was %s: closing its session", self.row.id, why)
            await self.push("revoked", {"reason": f"the pipeline was {why}"})
            self.ctx.stop()
            return
        was = self.routing
        self.row, self.routing = row, Routing(self.spec, row)
        if row.draining != was.draining:
            await self.push("drain" if row.draining else "undrain")
        now, then = self.routing, was
        if (now.tasks, now.slots, now.tags, now.match_only) != (
            then.tasks,
            then.slots,
            then.tags,
            then.match_only,
        ):
            await self.push("routing", self._welcome())


def _report(report: CommitReport, repeated: set[int], stale: list[int]) -> wire.Report:
    return wire.Report(
        committed=[*report.committed, *sorted(repeated)],
        stale=[*report.stale, *stale],
        effect_failures={str(job): why for job, why in report.effect_failures.items()},
    )


def _registrations(tasks: list[wire.TaskSpec]) -> tuple[list[TaskInfo], list[Limit]]:
    infos = [
        TaskInfo(
            name=t.name,
            version=t.version,
            tags=tuple(t.tags),
            ttl=t.ttl,
            timeout=t.timeout,
            retries=t.retries,
            niceness=t.niceness,
            depends_on=tuple(t.depends_on),
            rerun_on_change=t.rerun_on_change,
            max_failures=t.max_failures,
            pipeline_tag=t.pipeline_tag,
        )
        for t in tasks
    ]
    limits = {spec.name: limit(spec) for t in tasks for spec in t.limits}
    return infos, sorted(limits.values(), key=lambda lim: lim.name)


def _register(store: Store, *, infos: list[TaskInfo], limits: list[Limit]) -> None:
    store.register_tasks(infos)
    store.register_limits(limits)
