"""What can go wrong between actors, each saying which actor, node or field it was about."""

from __future__ import annotations


class LiveError(Exception):
    """Base of the live layer's errors."""


class BadAddress(LiveError, ValueError):
    """An address is not ``node:actor`` (or a name holds a ``:``)."""


class NoSuchActor(LiveError):
    """No actor lives at the address (it never did, or it has stopped)."""


class NodeLost(LiveError):
    """The actor's node left the cluster, or was never in it."""


class AskTimeout(LiveError, TimeoutError):
    """No reply came within an ask's timeout."""


class SchemaError(LiveError, ValueError):
    """A message did not match its action's schema; the message names the field."""


class UnknownAction(LiveError, LookupError):
    """The actor has no handler for the action."""


class RemoteError(LiveError):
    """The actor asked raised while handling the message: ``kind`` is the exception's type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class ActorStopped(LiveError):
    """The actor stopped before it answered."""


class KeyInvalid(LiveError, ValueError):
    """A shared-state key is empty, too long, or holds a control character."""
