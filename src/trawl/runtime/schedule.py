"""A task's scheduling options: revisits, rate limit, dependencies, failure handling."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from trawl.engine.revisit import Adaptive, Cooldowns
from trawl.model.durations import Duration, optional_seconds, seconds
from trawl.model.errors import InvalidInput
from trawl.model.limits import Limit, make_limit

DEFAULT_WEIGHTS = (40.0, 40.0, 20.0)
ADAPTIVE_EXHAUSTED = 14 * 86400.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Schedule:
    revisit: Adaptive | None = None
    rate_limit: Limit | None = None
    exempt_global: bool = False
    depends_on: tuple[str, ...] = ()
    rerun_on_change: bool = True
    max_failures: int | None = None
    cooldowns: Cooldowns = field(default_factory=Cooldowns)
    visit_weights: tuple[float, float, float] | None = None

    @property
    def gated(self) -> bool:
        """Whether claims need per-job decisions (dependencies or a visit policy)."""
        return bool(self.depends_on) or self.visit_weights is not None


def make_schedule(
    task: str,
    *,
    revisit: Adaptive | None,
    rate_limit: str | float | None,
    exempt_global: bool,
    depends_on: Iterable[str],
    rerun_on_change: bool,
    max_failures: int | None,
    not_found_cooldown: Duration,
    not_found_limit: int,
    failed_cooldown: Duration | None,
    visit_weights: tuple[float, float, float] | None,
) -> Schedule:
    """Check the options of *task* and bundle them."""
    if revisit is not None and not isinstance(revisit, Adaptive):
        raise InvalidInput(f"task {task!r}: revisit must be trawl.adaptive(min=..., max=...)")
    if isinstance(depends_on, str):
        raise InvalidInput(f"task {task!r}: depends_on must be a list, not {depends_on!r}")
    deps = tuple(depends_on)
    if task in deps:
        raise InvalidInput(f"task {task!r} cannot depend on itself")
    if max_failures is not None and (not isinstance(max_failures, int) or max_failures < 1):
        raise InvalidInput(f"task {task!r}: max_failures must be a positive integer")
    if not isinstance(not_found_limit, int) or not_found_limit < 1:
        raise InvalidInput(f"task {task!r}: not_found_limit must be a positive integer")
    exhausted = optional_seconds(failed_cooldown)
    if exhausted is None and revisit is not None:
        exhausted = ADAPTIVE_EXHAUSTED
    weights = (
        visit_weights
        if visit_weights is not None
        else (DEFAULT_WEIGHTS if revisit is not None else None)
    )
    if weights is not None and (len(weights) != 3 or min(weights) < 0 or sum(weights) <= 0):
        raise InvalidInput(f"task {task!r}: visit_weights must be three shares, e.g. (40, 40, 20)")
    return Schedule(
        revisit=revisit,
        rate_limit=None
        if rate_limit is None
        else make_limit(f"task:{task}", rate_limit, tasks=[task]),
        exempt_global=exempt_global,
        depends_on=deps,
        rerun_on_change=rerun_on_change,
        max_failures=max_failures,
        cooldowns=Cooldowns(
            not_found=seconds(not_found_cooldown),
            not_found_limit=not_found_limit,
            exhausted=exhausted,
        ),
        visit_weights=weights,
    )
