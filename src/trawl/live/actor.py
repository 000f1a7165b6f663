"""The behaviour of an actor: a class whose methods are its actions and daemons.

An action is an ``async def`` method taking one message, declared with :func:`action`; the
message's annotation (a msgspec Struct, or any type msgspec can check) is its schema, and a
message that does not match it never reaches the method. An action may take a second
parameter, the :class:`~trawl.live.conversation.Conversation` it is part of, to answer more
than once or to wait for the next message of the exchange. Its return value answers an ask.

A daemon is an ``async def`` method without parameters declared with :func:`daemon`: a
background loop that runs while the behaviour is in place, restarted by its policy.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

if TYPE_CHECKING:
    from trawl.live.context import Context
    from trawl.live.frames import Sentinel

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
Restart = Literal["never", "on_failure", "always"]


@dataclass(slots=True)
class ActionSpec:
    name: str
    method: str
    fn: Callable[..., Any]
    param: str
    wants_conversation: bool
    client: bool
    concurrent: bool = False
    _schema: Any = None
    _resolved: bool = False

    def schema(self) -> Any:
        """The message's annotation, resolved on first use (so a Struct may be defined
        after the actor class that names it)."""
        if not self._resolved:
            hints = typing.get_type_hints(self.fn, include_extras=True)
            self._schema, self._resolved = hints.get(self.param, Any), True
        return self._schema


@dataclass(frozen=True, slots=True)
class DaemonSpec:
    name: str
    method: str
    restart: Restart
    max_restarts: int
    within: float
    dead_man: bool


def action(
    name: str | None = None, *, client: bool = False, concurrent: bool = False
) -> Callable[[F], F]:
    """Declare an action. *name* defaults to the method's; *client* lets a WebSocket client
    call it (a session's other actions are for actors only). A *concurrent* action runs in
    a task of its own, so the mailbox moves on while it waits (on a database, say): at most
    ``MAX_CONCURRENT`` at once per actor, cancelled when the actor stops."""

    def mark(fn: F) -> F:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"action {fn.__qualname__} must be an async def method")
        fn.__trawl_action__ = (name or fn.__name__, client, concurrent)  # type: ignore[attr-defined]
        return fn  # type: ignore[return-value]

    return mark


def daemon(
    *,
    restart: Restart = "on_failure",
    max_restarts: int = 5,
    within: float = 60.0,
    dead_man: bool = False,
) -> Callable[[F], F]:
    """Declare a daemon. *restart*: ``never``, ``on_failure`` (after an exception) or
    ``always`` (also after it returns), at most *max_restarts* times in *within* seconds,
    with a backoff from 0.1 s doubling to 5 s. With *dead_man*, the actor stops when the
    daemon ends for good: ``crashed`` with its exception, or ``cancelled`` if it returned."""
    if restart not in ("never", "on_failure", "always"):
        raise ValueError(f"restart={restart!r}: expected never, on_failure or always")
    if max_restarts < 0 or within <= 0:
        raise ValueError("max_restarts must be >= 0 and within > 0")

    def mark(fn: F) -> F:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"daemon {fn.__qualname__} must be an async def method")
        fn.__trawl_daemon__ = (restart, max_restarts, within, dead_man)  # type: ignore[attr-defined]
        return fn  # type: ignore[return-value]

    return mark


class Actor:
    """Subclass it; ``self.ctx`` is the actor's way to the rest of the system once started.

    ``on_start`` runs before the first message (messages wait in the mailbox meanwhile, and
    other actors carry on); ``on_stop`` after the last, whatever the reason. ``on_sentinel``
    receives what a monitored actor's end was (by default it is logged and dropped)."""

    ctx: Context
    _actions: ClassVar[dict[str, ActionSpec]]
    _daemons: ClassVar[tuple[DaemonSpec, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        actions: dict[str, ActionSpec] = {}
        daemons: dict[str, DaemonSpec] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if hasattr(value, "__trawl_action__"):
                    spec = _action_spec(klass, attr, value)
                    actions = {k: v for k, v in actions.items() if v.method != attr}
                    actions[spec.name] = spec
                elif hasattr(value, "__trawl_daemon__"):
                    restart, most, within, dead_man = value.__trawl_daemon__
                    daemons[attr] = DaemonSpec(attr, attr, restart, most, within, dead_man)
        cls._actions = actions
        cls._daemons = tuple(daemons.values())

    async def on_start(self) -> None:
        """Runs once before the first message."""

    async def on_stop(self) -> None:
        """Runs once after the last message (not after a ``replace``)."""

    async def on_sentinel(self, sentinel: Sentinel) -> None:
        """A monitored actor has stopped."""

    async def _after_stop(self, sentinel: Sentinel) -> None:
        """For the layer's own kinds of actor (a session closes its socket here)."""


Actor._actions = {}
Actor._daemons = ()


def _action_spec(klass: type, attr: str, fn: Callable[..., Any]) -> ActionSpec:
    name, client, concurrent = fn.__trawl_action__  # type: ignore[attr-defined]
    params = list(inspect.signature(fn).parameters.values())[1:]
    if not 1 <= len(params) <= 2:
        raise TypeError(
            f"action {klass.__name__}.{attr} takes (self, message) or (self, message, conversation)"
        )
    return ActionSpec(name, attr, fn, params[0].name, len(params) == 2, client, concurrent)
