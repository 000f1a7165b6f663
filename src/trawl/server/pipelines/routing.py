"""Which work goes to which pipeline (mnbot's rules): work with a pipeline tag goes only to
pipelines with that tag; a match-only pipeline takes only work tagged for one of its tags;
untagged work goes to the pipelines that are not match-only."""

from __future__ import annotations

from trawl.engine.claim import TaskGate
from trawl.model import wire
from trawl.model.limits import Limit
from trawl.model.records import PipelineRow


def eligible(work_tag: str | None, tags: tuple[str, ...], match_only: bool) -> bool:
    """Whether a pipeline with *tags* (and *match_only*) may take work tagged *work_tag*."""
    if work_tag is None:
        return not match_only
    return work_tag in tags


class Routing:
    """What a pipeline's session may claim now: its hello's tasks that are routed to it,
    how many at once, and whether it is draining."""

    def __init__(self, hello: wire.Hello, row: PipelineRow) -> None:
        self.slots = min(hello.slots, row.slots)
        self.draining = row.draining
        routed = [t for t in hello.tasks if eligible(t.pipeline_tag, row.tags, row.match_only)]
        self.tasks = tuple(t.name for t in routed)
        self.gates = [_gate(t) for t in routed]


def limit(spec: wire.LimitSpec) -> Limit:
    tasks = None if spec.tasks is None else tuple(spec.tasks)
    return Limit(name=spec.name, rate=spec.rate, burst=spec.burst, tasks=tasks)


def _gate(task: wire.TaskSpec) -> TaskGate:
    return TaskGate(
        name=task.name,
        timeout=task.timeout,
        limits=tuple(limit(spec) for spec in task.limits),
        depends_on=tuple(task.depends_on),
        weights=task.weights,
    )
