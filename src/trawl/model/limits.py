"""Rate limits as declared: ``"20/s"`` on a task, or named limits on the app."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trawl.model.durations import seconds
from trawl.model.errors import InvalidInput

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(.+?)\s*$")

KeyFunction = Callable[["LimitItem"], object]


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitItem:
    """What a limit's key function sees: the item's canonical id and its data."""

    id: str
    data: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Limit:
    """A rate limit: ``rate`` permits per second, bursts up to ``burst``.

    ``tasks`` are name patterns (``fnmatch``: ``"shop.*"``); ``None`` makes the limit global,
    applying to every task not exempted from it. ``key`` splits the limit per item (for
    example per host): each key gets the full rate.
    """

    name: str
    rate: float
    burst: int = 1
    tasks: tuple[str, ...] | None = None
    key: KeyFunction | None = None

    @property
    def interval(self) -> float:
        return 1.0 / self.rate

    @property
    def is_global(self) -> bool:
        return self.tasks is None

    def applies_to(self, task: str, *, exempt_global: bool) -> bool:
        if self.tasks is None:
            return not exempt_global
        return any(fnmatch.fnmatchcase(task, pattern) for pattern in self.tasks)


def parse_rate(text: str | float) -> float:
    """Permits per second from ``"20/s"``, ``"5/m"``, ``"100/h"``, ``"1/10s"`` or a number."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        rate = float(text)
    elif isinstance(text, str) and (match := _RATE.match(text)):
        count, per = match.groups()
        period = seconds(per if per[0].isdigit() else f"1{per}")
        if period <= 0:
            raise InvalidInput(f"rate {text!r}: the period must be positive")
        rate = float(count) / period
    else:
        raise InvalidInput(
            f"cannot read rate {text!r}: write it as COUNT/PERIOD, e.g. '20/s', '5/m', '1/10s'"
        )
    if rate <= 0:
        raise InvalidInput(f"rate {text!r} must be positive")
    return rate


def make_limit(
    name: str,
    rate: str | float,
    *,
    burst: int = 1,
    tasks: list[str] | tuple[str, ...] | None = None,
    key: KeyFunction | None = None,
) -> Limit:
    """A checked :class:`Limit`."""
    if not isinstance(burst, int) or burst < 1:
        raise InvalidInput(f"limit {name!r}: burst must be an integer >= 1, got {burst!r}")
    if isinstance(tasks, str):
        raise InvalidInput(f"limit {name!r}: tasks must be a list of patterns, not {tasks!r}")
    if key is not None and not callable(key):
        raise InvalidInput(f"limit {name!r}: key must be a function of the item")
    return Limit(
        name=name,
        rate=parse_rate(rate),
        burst=burst,
        tasks=None if tasks is None else tuple(tasks),
        key=key,
    )
