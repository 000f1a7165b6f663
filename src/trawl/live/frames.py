"""What travels between nodes: messages and the cluster's own control frames.

Every frame is a tagged msgspec Struct, so a node decodes exactly these shapes from the wire
and nothing else. Bodies are plain data (a Struct is sent as its fields); the receiving actor
checks a body against its action's schema.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Outcome = Literal["done", "cancelled", "crashed", "missing"]


class Envelope(msgspec.Struct, frozen=True, tag="msg", omit_defaults=True):
    """One message to the actor at ``to``. ``conv`` correlates a conversation (an ask is a
    conversation of one exchange); ``reply`` marks an answer within one, and ``error`` an
    answer saying the handler failed (``Kind: message``)."""

    to: str
    action: str = ""
    body: Any = None
    sender: str | None = None
    conv: str | None = None
    reply: bool = False
    error: str | None = None


class Sentinel(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a monitor is told, once, when the actor it watches has stopped: ``done`` (it
    returned or was stopped), ``cancelled`` (its node shut down, or a dead-man's daemon
    ended), ``crashed`` (``error`` says with what; a node that went silent counts), or
    ``missing`` (nothing lived at the address when the monitor was set)."""

    actor: str
    outcome: Outcome
    error: str | None = None


class Ping(msgspec.Struct, frozen=True, tag="ping"):
    node: str


class Bye(msgspec.Struct, frozen=True, tag="bye"):
    """A node leaving in good order: its actors have stopped and sent their sentinels."""

    node: str


class Expelled(msgspec.Struct, frozen=True, tag="expelled"):
    """To a node the cluster dropped as silent that is heard from again."""

    node: str


class Monitor(msgspec.Struct, frozen=True, tag="monitor"):
    target: str
    watcher: str


class Registered(msgspec.Struct, frozen=True, tag="reg"):
    node: str
    service: str
    address: str
    added: bool


class Snapshot(msgspec.Struct, frozen=True, tag="snapshot"):
    """A node's whole local registry, sent to a node it has just met."""

    node: str
    services: dict[str, list[str]]


Control = Ping | Bye | Expelled | Monitor | Registered | Snapshot
Frame = Envelope | Control

_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[Frame] = msgspec.json.Decoder(Frame)


def encode(frame: Frame) -> bytes:
    return _encoder.encode(frame)


def decode(data: bytes) -> Frame:
    return _decoder.decode(data)
