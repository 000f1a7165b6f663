"""Actor types: how ``trawl run`` runs each task's work in processes of its own.

An *actor* is a worker process restricted to one task (and, for keyed tasks, one launch
key, such as a browser persona) that exits once its queue stays empty. By default every
task is one actor type; ``@app.task(..., actor=trawl.Actor(...))`` changes how many run,
how they are keyed, and what each starts and stops around its life.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trawl.model.errors import InvalidInput
from trawl.model.limits import KeyFunction, LimitItem

log = logging.getLogger("trawl.actors")

DEFAULT_MAX_ACTORS = 4
DEFAULT_LINGER = 1.0  # seconds an actor waits on an empty queue before it exits


@dataclass(frozen=True, kw_only=True, slots=True)
class ActorInfo:
    """One actor (or one ``trawl worker``) as hooks and the task itself see it."""

    type: str  # the actor type: its task's name ("worker" for `trawl worker`)
    key: str | None  # the launch key of a keyed actor type
    pid: int
    owner: str  # the lease owner written on the jobs it claims
    tasks: tuple[str, ...]
    resource: Any = None  # what the actor type's on_startup returned


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueInfo:
    """What is due for one actor type, as the orchestrator read it this tick."""

    depth: int  # due jobs, counted up to a cap
    capped: bool  # depth reached the cap: there may be more
    keys: Mapping[str | None, int]  # due jobs per launch key (one None entry when unkeyed)


SpawnPolicy = Callable[[QueueInfo, Sequence[ActorInfo], "ActorType"], Iterable[str | None]]
Startup = Callable[[ActorInfo], Any | Awaitable[Any]]
Shutdown = Callable[[ActorInfo, Any], Any | Awaitable[Any]]


def actors_to_spawn(
    queue: QueueInfo, running: Sequence[ActorInfo], actor_type: ActorType
) -> list[str | None]:
    """The default policy, the lifecycle spec's example counted in actor slots: per launch
    key, one actor for a small queue, two once more than 5 rounds of work are due, all it
    may have once more than 10 are. Returns the keys of the actors to start now.

    A "round" is one batch of the actor's concurrency (the spec's actors ran one object at
    a time). The orchestrator then clips the result to ``max_actors`` and the global cap.
    """
    have = Counter(a.key for a in running)
    wanted: list[str | None] = []
    per_round = max(1, actor_type.concurrency)
    for key, depth in queue.keys.items():
        rounds = math.ceil(depth / per_round) if depth > 0 else 0
        target = actor_type.max_actors if rounds > 10 else 2 if rounds > 5 else min(rounds, 1)
        wanted += [key] * max(0, min(target, actor_type.max_actors) - have[key])
    return wanted


@dataclass(frozen=True, kw_only=True, slots=True)
class Actor:
    """How ``trawl run`` runs a task: ``@app.task(..., actor=trawl.Actor(...))``.

    ``key``: a function of the item (``item.id``, ``item.data``) giving a launch key; due
    jobs are then served by separate actors per key (one browser profile per persona, say),
    each claiming only its key's jobs. ``max_actors``: most actors of this type at once,
    all keys together. ``concurrency``: jobs one actor runs at a time (default: ``trawl run
    --concurrency``). ``on_startup(actor)`` runs once in each actor before it claims (plain
    or ``async def``); what it returns is ``trawl.current_actor().resource`` for the tasks.
    ``on_shutdown(actor, resource)`` runs when the actor exits, even after a failure.
    ``spawn``: the policy deciding how many actors to start (see :func:`actors_to_spawn`).
    ``linger``: seconds an actor stays on an empty queue before exiting.
    """

    key: KeyFunction | None = None
    max_actors: int = DEFAULT_MAX_ACTORS
    concurrency: int | None = None
    on_startup: Startup | None = None
    on_shutdown: Shutdown | None = None
    spawn: SpawnPolicy = actors_to_spawn
    linger: float = DEFAULT_LINGER

    def __post_init__(self) -> None:
        if not isinstance(self.max_actors, int) or self.max_actors < 1:
            raise InvalidInput(
                f"Actor max_actors must be a positive integer, not {self.max_actors!r}"
            )
        if self.concurrency is not None and (
            not isinstance(self.concurrency, int) or self.concurrency < 1
        ):
            raise InvalidInput(
                f"Actor concurrency must be a positive integer, not {self.concurrency!r}"
            )
        for name in ("key", "on_startup", "on_shutdown", "spawn"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise InvalidInput(f"Actor {name} must be a function, not {value!r}")
        if self.linger < 0:
            raise InvalidInput(f"Actor linger must be >= 0, not {self.linger!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class ActorType:
    """One task's actors as the orchestrator runs them (the task's Actor, defaults filled)."""

    name: str
    timeout: float
    niceness: int
    spec: Actor = field(default_factory=Actor)
    concurrency: int = 16

    @property
    def keyed(self) -> bool:
        return self.spec.key is not None

    @property
    def max_actors(self) -> int:
        return self.spec.max_actors

    def to_spawn(self, queue: QueueInfo, running: Sequence[ActorInfo]) -> list[str | None]:
        """The policy's answer, clipped to ``max_actors``; a policy that raises spawns none."""
        try:
            keys = list(self.spec.spawn(queue, running, self))
        except Exception:
            log.exception("spawn policy of actor type %s failed; starting no actor", self.name)
            return []
        return _interleave(keys)[: max(0, self.max_actors - len(running))]


def _interleave(keys: list[str | None]) -> list[str | None]:
    """One of each key in turn, so clipping to a cap leaves no key without an actor."""
    groups: dict[str | None, list[str | None]] = {}
    for key in keys:
        groups.setdefault(key, []).append(key)
    out: list[str | None] = []
    while groups:
        for key in list(groups):
            out.append(groups[key].pop())
            if not groups[key]:
                del groups[key]
    return out


def actor_key(fn: KeyFunction, item_id: str, data: dict[str, Any]) -> str:
    """The launch key of an item; a key function that fails gives ``"<error>"``."""
    try:
        return str(fn(LimitItem(id=item_id, data=data)))
    except Exception as error:
        log.warning("actor key function failed on %s: %s", item_id, error)
        return "<error>"


# The actor this process is, if it is one (set by the actor process at start-up).
_current: list[ActorInfo] = []


def current_actor() -> ActorInfo | None:
    """The actor running this code (``trawl run``), with its ``resource``; else ``None``."""
    return _current[-1] if _current else None


def set_current(actor: ActorInfo | None) -> None:
    _current[:] = [] if actor is None else [actor]
