"""Which work goes to which pipeline (mnbot's rules): work with a pipeline tag goes only to
pipelines with that tag; a match-only pipeline takes only work tagged for one of its tags;
untagged work goes to the pipelines that are not match-only."""

from __future__ import annotations

from trawl.crawl.browser.chromium import BROWSER
from trawl.crawl.options import Options
from trawl.engine.claim import TaskGate
from trawl.model import wire
from trawl.model.limits import Limit
from trawl.model.records import PipelineRow
from trawl.store.crawls import FETCH_TASK, CrawlRow


def eligible(work_tag: str | None, tags: tuple[str, ...], match_only: bool) -> bool:
    """Whether a pipeline with *tags* (and *match_only*) may take work tagged *work_tag*."""
    if work_tag is None:
        return not match_only
    return work_tag in tags


class Routing:
    """What a pipeline's session may claim now: its hello's tasks that are routed to it,
    how many at once, and whether it is draining. The crawler's fetch task is routed per
    crawl instead (by the crawl's tag): ``fetch`` is its spec if the pipeline runs it."""

    def __init__(self, hello: wire.Hello, row: PipelineRow) -> None:
        self.slots = min(hello.slots, row.slots)
        self.draining = row.draining
        self.tags, self.match_only = row.tags, row.match_only
        self.browser = BROWSER in hello.capabilities  # it renders pages in Chromium
        self.pinned, self.lock = row.crawl, row.crawl_lock
        # slots held for the pinned crawl (the rest are routed as usual); all of them if
        # the pin names no number
        self.pinned_slots = (
            self.slots if row.crawl_slots is None else min(row.crawl_slots, self.slots)
        )
        self.fetch = next((t for t in hello.tasks if t.name == FETCH_TASK), None)
        routed = [
            t
            for t in hello.tasks
            if t.name != FETCH_TASK and eligible(t.pipeline_tag, row.tags, row.match_only)
        ]
        self.tasks = tuple(t.name for t in routed) + ((FETCH_TASK,) if self.fetch else ())
        self.gates = [_gate(t) for t in routed]

    def crawls(self, crawls: list[CrawlRow]) -> list[int]:
        """Of *crawls*, those whose pages the pipeline's unpinned slots may fetch now, best
        first: active (not aborted, concurrency above 0) and routed to it; lower niceness,
        then oldest."""
        routed = [c for c in crawls if not c.aborted and c.concurrency > 0 and self._takes(c)]
        return [c.id for c in sorted(routed, key=lambda c: (c.niceness, c.created_at, c.id))]

    def pinned_crawl(self, crawls: list[CrawlRow]) -> list[int]:
        """The pinned crawl, if it is active now."""
        return [c.id for c in crawls if c.id == self.pinned and not c.aborted and c.concurrency > 0]

    def _takes(self, crawl: CrawlRow) -> bool:
        if self.pinned is not None and self.pinned_slots >= self.slots:
            return False  # every slot is the pinned crawl's
        if Options.from_json(crawl.options).browser and not self.browser:
            return False  # a --browser crawl's pages go only to pipelines with a browser
        return eligible(crawl.tag, self.tags, self.match_only)


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
