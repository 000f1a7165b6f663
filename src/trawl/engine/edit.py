"""Operator edits: effects applied outside any job, in one transaction of their own.

The CLI (and later the API) change items through the same effects a task buffers, so an
edit made from outside follows the same rules and journals the same way as one a task
commits.
"""

from __future__ import annotations

from collections.abc import Iterable

from trawl.engine.apply import EffectApplier
from trawl.model import effects as fx
from trawl.store.store import Store


def apply(store: Store, effects: Iterable[fx.Effect], *, by: str) -> None:
    """Apply *effects* in order, all or nothing; *by* is recorded as their author."""
    with store.write():
        EffectApplier(store, now=store.clock(), task=by).apply_all(tuple(effects))
        store.notify()
