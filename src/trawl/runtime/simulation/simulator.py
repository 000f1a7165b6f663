"""A discrete-time simulation of one task's scheduling, with trawl's own scheduling code.

The task's jobs live in a throwaway SQLite database whose clock is simulated. Every step
(10 minutes by default) the simulator claims what the task's capacity allows with the real
claim (visit policies, rate limits, cooldowns, paused tasks), lets the simulated sources
(:mod:`world`) say how each visit ends, turns that into the attempt's result with the real
outcome code (result hash, eventful or not, adaptive revisit with its jitter, backoff,
not-found cooldown) and commits it with the real commit. Only the task's function and the
passing of time are simulated. Dependencies on other tasks are not (they are left out).

The same seed gives the same report: the world's draws are hashes, and the real code's own
jitter draws from Python's ``random``, seeded for the run.
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trawl.engine import claim as engine_claim
from trawl.engine.commit import commit
from trawl.model.errors import InvalidInput, NotFound
from trawl.model.records import AttemptResult, ClaimedJob, FailureInfo, NewItem
from trawl.model.states import Outcome
from trawl.runtime.app import App, TaskDef
from trawl.runtime.context import Context
from trawl.runtime.outcome import attempt_result
from trawl.runtime.simulation.report import Day, PolicyReport
from trawl.runtime.simulation.variants import Variant
from trawl.runtime.simulation.world import DAY, Visit, World, WorldSpec
from trawl.store import codec
from trawl.store.store import Store

START = 1_767_225_600.0  # 2026-01-01 UTC: a fixed start, so reports repeat
OWNER = "simulator"
ADD_BATCH = 10_000


@dataclass(frozen=True, kw_only=True, slots=True)
class SimSpec:
    world: WorldSpec
    days: int = 30
    capacity: float | None = None  # visits per day; None: one per item per day
    step: float = 600.0  # seconds of simulated time per step

    def __post_init__(self) -> None:
        if self.days < 1:
            raise InvalidInput(f"simulate at least one day, not {self.days}")
        if not 0 < self.step <= DAY:
            raise InvalidInput(f"the step must be between 0 and a day, got {self.step:g}s")
        if self.capacity is not None and self.capacity <= 0:
            raise InvalidInput(f"capacity must be positive, got {self.capacity:g} visits/day")

    @property
    def per_day(self) -> float:
        return self.capacity if self.capacity is not None else float(self.world.items)


class _NoReads:
    """Simulated tasks read nothing: their outcome comes from the world."""

    async def get_item(self, alias: str) -> None:
        raise RuntimeError("a simulated task does not read the database")

    async def get_metadata(self, task: str, alias: str) -> None:
        raise RuntimeError("a simulated task does not read the database")

    async def with_store(self, fn: Callable[[Store], Any]) -> Any:
        raise RuntimeError("a simulated task does not read the database")


def task_of(app: App, name: str | None) -> TaskDef:
    """The task to simulate: *name*, or the app's only task that trawl runs itself or not."""
    if name is not None:
        return app.get(name)
    declared = app.declared()
    if len(declared) != 1:
        names = ", ".join(d.name for d in declared) or "none"
        raise InvalidInput(f"name the task to simulate with --task (the app declares: {names})")
    return declared[0]


def simulate(
    app: App,
    task: TaskDef,
    variant: Variant,
    spec: SimSpec,
    on_day: Callable[[Day], None] | None = None,
) -> PolicyReport:
    """Run *task* under *variant* for the days of *spec*; returns the per-day report."""
    applied = variant.apply(task)
    d = dataclasses.replace(applied, schedule=dataclasses.replace(applied.schedule, depends_on=()))
    with _seeded(spec.world.seed), _throwaway() as url:
        clock = _Clock(START)
        with Store(url, clock=clock) as store:
            store.ensure_schema(auto=True)
            _populate(store, d, spec.world.items)
            return _Run(app, d, spec, store, clock, variant.name, on_day).run()


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class _Run:
    def __init__(
        self,
        app: App,
        d: TaskDef,
        spec: SimSpec,
        store: Store,
        clock: _Clock,
        name: str,
        on_day: Callable[[Day], None] | None,
    ) -> None:
        self.d, self.spec, self.store, self.clock = d, spec, store, clock
        self.world = World(spec.world, START)
        self.report = PolicyReport(policy=name, items=spec.world.items)
        self.on_day = on_day
        self.gate = engine_claim.TaskGate(
            name=d.name,
            timeout=d.timeout,
            limits=tuple(app.limits_for(d)),
            weights=d.schedule.visit_weights,
        )
        self._credit = 0.0
        self._today = {"visits": 0, "changed": 0, "failed": 0}

    def run(self) -> PolicyReport:
        per_step = self.spec.per_day * self.spec.step / DAY
        steps_per_day = round(DAY / self.spec.step)
        for day in range(1, self.spec.days + 1):
            for step in range(1, steps_per_day + 1):
                self._credit += per_step
                self._step(START + ((day - 1) * steps_per_day + step) * self.spec.step)
            self._close_day(day)
        return self.report

    def _step(self, end: float) -> None:
        """Claim and visit until *end*: at the step's start, and again whenever a job a
        rate limit deferred comes due within the step (the claim says when), so limits
        see claims as often as workers would make them."""
        while int(self._credit) > 0:
            batch = engine_claim.claim(self.store, [self.gate], int(self._credit), OWNER)
            self._credit -= len(batch.jobs)
            if batch.jobs:
                commit(self.store, [self._visit(job) for job in batch.jobs])
            if batch.wake_at is None or batch.wake_at >= end:
                break
            self.clock.now = max(self.clock.now, batch.wake_at)
        if int(self._credit) > 0:
            self._credit = min(self._credit, 1.0)  # idle capacity is not saved up
        self.clock.now = end

    def _visit(self, job: ClaimedJob) -> AttemptResult:
        n = int(job.item_id.rsplit(":", 1)[1])
        seen = self.world.visit(n, self.clock.now)
        self._today["visits"] += 1
        ctx = Context(
            id=job.item_id, data=job.data, tags=job.tags, attempt=job.attempt,
            task=job.task, reader=_NoReads(),
        )  # fmt: skip
        if seen in (Visit.FAILED, Visit.NOT_FOUND):
            self._today["failed"] += 1
            error = NotFound("simulated: gone") if seen is Visit.NOT_FOUND else None
            info = FailureInfo(error_type=type(error).__name__ if error else "Simulated",
                               message="simulated failure")  # fmt: skip
            return attempt_result(
                self.d, job, ctx, Outcome.FAILURE, failure=info, not_found=error is not None
            )
        self._today["changed"] += seen is Visit.CHANGED
        result = codec.dumps({"version": self.world.version[n]})
        return attempt_result(self.d, job, ctx, Outcome.SUCCESS, result=result)

    def _close_day(self, day: int) -> None:
        fresh, staleness = self.world.freshness(self.clock.now)
        queue = self.store.queues.due_counts([self.d.name], self.clock.now, 10**9)[self.d.name]
        record = Day(day=day, fresh=fresh, staleness=staleness / 3600, queue=queue, **self._today)
        self.report.days.append(record)
        self._today = dict.fromkeys(self._today, 0)
        if self.on_day is not None:
            self.on_day(record)


def _populate(store: Store, d: TaskDef, items: int) -> None:
    store.register_tasks([d.info()])
    tag = d.tags[0] if d.tags else None
    if tag is None:
        raise InvalidInput(f"task {d.name!r} has no tags: no item would select it")
    for first in range(0, items, ADD_BATCH):
        store.add_items(
            [
                NewItem(id=f"sim:{n}", tags=((tag, None),), data=_data(n))
                for n in range(first, min(items, first + ADD_BATCH))
            ]
        )


def _data(n: int) -> dict[str, Any]:
    # A URL on one of 100 hosts, so limits keyed by host have keys to split on.
    return {"url": f"https://site{n % 100}.example/item/{n}", "n": n}


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Python's ``random`` seeded for the run (the real code's jitter draws from it)."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


@contextmanager
def _throwaway() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="trawl-simulate-") as folder:
        # Nothing to keep if the machine crashes: no fsync.
        yield f"sqlite:///{Path(folder) / 'simulation.db'}?synchronous=off"
