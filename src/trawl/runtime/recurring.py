"""Recurring schedules as declared: a name, a cron expression in a time zone, and the
``trawl`` command line to run when it fires.

A schedule is an item (``schedule:<name>``, tagged ``trawl.schedule``) whose job belongs to
the built-in task ``trawl.schedule``: it is claimed, leased and fenced like any job, and
each run sets its own TTL to the next fire time. Cron arithmetic is cronsim's, in the
schedule's zone, so a daily 02:30 runs once on the day clocks go back and at 03:00 on the
day they go forward.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from trawl.model.errors import InvalidInput
from trawl.model.ids import check_id

TASK = "trawl.schedule"
TAG = "trawl.schedule"
PREFIX = "schedule:"
ACTIONS = ("crawl", "add", "expire")
MAX_FIRES = 100_000  # fires counted between two runs before we stop counting


@dataclass(frozen=True, kw_only=True, slots=True)
class Recurring:
    """One schedule: when (``cron`` in ``tz``) and what (``action``, a trawl command line)."""

    name: str
    cron: str
    tz: str
    action: tuple[str, ...]
    since: float  # fires before this were never due (when the schedule was added)
    paused: bool = False
    run_now: int = 0  # bumped by `trawl schedule run-now`; a run that sees it move acts

    @property
    def item_id(self) -> str:
        return PREFIX + self.name

    @property
    def kind(self) -> str:
        return self.action[0]

    def command(self) -> str:
        return shlex.join(("trawl", *self.action))

    def to_data(self) -> dict[str, Any]:
        return {
            "cron": self.cron,
            "tz": self.tz,
            "action": list(self.action),
            "since": self.since,
            "paused": self.paused,
            "run_now": self.run_now,
        }

    @classmethod
    def from_data(cls, item_id: str, data: dict[str, Any]) -> Recurring:
        return cls(
            name=item_id.removeprefix(PREFIX),
            cron=str(data["cron"]),
            tz=str(data["tz"]),
            action=tuple(str(a) for a in data["action"]),
            since=float(data["since"]),
            paused=bool(data.get("paused", False)),
            run_now=int(data.get("run_now", 0)),
        )


def make(name: str, cron: str, tz: str, action: tuple[str, ...], now: float) -> Recurring:
    """A checked schedule; every mistake is named."""
    check_id(PREFIX + name)
    if not name or any(c.isspace() for c in name):
        raise InvalidInput(f"schedule name {name!r} must be non-empty, without spaces")
    zone(tz)
    next_fire(cron, tz, now)  # checks the expression
    if not action:
        raise InvalidInput("a schedule needs an action after `--`, e.g. -- crawl URL --depth 2")
    if action[0] not in ACTIONS:
        allowed = ", ".join(ACTIONS)
        raise InvalidInput(f"schedule action {action[0]!r} is not one of: {allowed}")
    return Recurring(name=name, cron=cron, tz=tz, action=action, since=now)


def zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(
            f"unknown time zone {tz!r} (an IANA name such as Europe/Paris)"
        ) from None


def next_fire(cron: str, tz: str, after: float) -> float:
    """The first fire time strictly after *after* (Unix seconds)."""
    return fires(cron, tz, after, math.inf, limit=1)[0]


def fires(cron: str, tz: str, after: float, until: float, *, limit: int = MAX_FIRES) -> list[float]:
    """Fire times in (*after*, *until*], at most *limit* of them."""
    start = datetime.fromtimestamp(after, UTC).astimezone(zone(tz))
    try:
        found = CronSim(cron, start)
        out: list[float] = []
        for when in found:
            at = when.timestamp()
            if at > until or len(out) >= limit:
                break
            if at > after:
                out.append(at)
        return out
    except (CronSimError, StopIteration) as error:
        raise InvalidInput(f"bad cron expression {cron!r}: {error}") from None
