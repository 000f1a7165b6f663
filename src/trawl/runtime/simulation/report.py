"""What a simulation reports: per day, and a summary per policy."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True, slots=True)
class Day:
    day: int  # 1-based
    visits: int
    changed: int  # visits that found a change (eventful)
    failed: int  # transient failures and not-found results
    fresh: float  # share of items whose latest version we hold, at the end of the day
    staleness: float  # mean over items of how long ago their unseen change came, hours
    queue: int  # jobs due and not run, at the end of the day


@dataclass(kw_only=True, slots=True)
class PolicyReport:
    policy: str
    items: int
    days: list[Day] = field(default_factory=list)

    @property
    def visits(self) -> int:
        return sum(d.visits for d in self.days)

    @property
    def fresh(self) -> float:
        """The share of items fresh, averaged over the days."""
        return sum(d.fresh for d in self.days) / len(self.days) if self.days else 0.0

    @property
    def staleness(self) -> float:
        return sum(d.staleness for d in self.days) / len(self.days) if self.days else 0.0

    @property
    def freshness_per_visit(self) -> float:
        """Fresh item-days bought per visit: the mean number of items fresh, divided by the
        visits made per day."""
        per_day = self.visits / len(self.days) if self.days else 0.0
        return self.fresh * self.items / per_day if per_day else 0.0
