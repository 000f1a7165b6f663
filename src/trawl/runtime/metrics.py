"""Built-in plugin: counters of what an orchestrator did, for its log and progress line."""

from __future__ import annotations

from collections import Counter

from trawl.model.records import AttemptResult
from trawl.runtime.actor.spec import ActorInfo
from trawl.runtime.plugins import hookimpl


class Metrics:
    """Counts ticks, actors started and how they ended, and jobs the orchestrator settled
    for actors that died holding them."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    @hookimpl
    def trawl_orchestrator_tick(self) -> None:
        self.counts["ticks"] += 1

    @hookimpl
    def trawl_actor_spawned(self, actor: ActorInfo) -> None:
        self.counts["actors_spawned"] += 1

    @hookimpl
    def trawl_actor_exited(self, reason: str) -> None:
        self.counts[f"actors_{reason.replace(' ', '_')}"] += 1

    @hookimpl
    def trawl_job_failed(self, job: AttemptResult) -> None:
        self.counts["jobs_failed_for_dead_actors"] += 1

    @hookimpl
    def trawl_job_released(self, job: AttemptResult) -> None:
        self.counts["jobs_released_for_dead_actors"] += 1

    def snapshot(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))

    def line(self) -> str:
        return ", ".join(f"{name} {count}" for name, count in self.snapshot().items()) or "none"
