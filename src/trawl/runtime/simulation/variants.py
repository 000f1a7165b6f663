"""The policies a simulation compares: the task as declared, or with its revisit replaced."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from trawl.engine.revisit import Adaptive, adaptive
from trawl.model.durations import seconds
from trawl.model.errors import InvalidDuration, InvalidInput
from trawl.runtime.app import TaskDef
from trawl.runtime.schedule import ADAPTIVE_EXHAUSTED, DEFAULT_WEIGHTS

HELP = "app (as declared), fixed:DURATION (a fixed TTL), adaptive:MIN:MAX"


@dataclass(frozen=True, kw_only=True, slots=True)
class Variant:
    name: str  # as written: "app", "fixed:1d", "adaptive:1h:30d"
    ttl: float | None = None  # fixed:
    revisit: Adaptive | None = None  # adaptive:

    def apply(self, d: TaskDef) -> TaskDef:
        """*d* with this variant's revisit policy."""
        if self.revisit is not None:
            weights = d.schedule.visit_weights or DEFAULT_WEIGHTS
            cooldowns = d.schedule.cooldowns
            if cooldowns.exhausted is None:
                cooldowns = dataclasses.replace(cooldowns, exhausted=ADAPTIVE_EXHAUSTED)
            schedule = dataclasses.replace(
                d.schedule, revisit=self.revisit, visit_weights=weights, cooldowns=cooldowns
            )
            return dataclasses.replace(d, schedule=schedule)
        if self.ttl is not None:
            schedule = dataclasses.replace(d.schedule, revisit=None, visit_weights=None)
            return dataclasses.replace(d, ttl=self.ttl, schedule=schedule)
        return d


def parse(text: str) -> Variant:
    """A ``--policy`` value."""
    kind, _, rest = text.partition(":")
    try:
        if kind == "app" and not rest:
            return Variant(name=text)
        if kind == "fixed" and rest:
            ttl = seconds(rest)
            if ttl <= 0:
                raise InvalidInput(f"policy {text!r}: the interval must be positive")
            return Variant(name=text, ttl=ttl)
        if kind == "adaptive" and rest.count(":") == 1:
            low, high = rest.split(":")
            return Variant(name=text, revisit=adaptive(min=low, max=high))
    except InvalidDuration as error:
        raise InvalidInput(f"policy {text!r}: {error}") from None
    raise InvalidInput(f"unknown policy {text!r}: use {HELP}")
