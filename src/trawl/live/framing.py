"""How a WebSocket session's frames look on the wire: a :class:`Framing` turns a client's
text frames into messages for the session's actor, and the actor's replies, events and
queries into frames. :class:`LiveFraming` is the live layer's own (see
:mod:`trawl.live.session`); a server can speak another protocol over the same sessions by
giving :class:`~trawl.live.LiveApp` another framing (trawl's remote pipelines do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import msgspec

from trawl.live import session as codes
from trawl.live.session import Session

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


class Refused(Exception):
    """A hello the server will not take: the socket is closed with *code* and *reason*."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


class BadFrame(Exception):
    """A frame that is not of the protocol's shape; the client is told, the session goes on."""


@dataclass(frozen=True, slots=True)
class Request:
    """A client's message to its session's actor; *conv* asks for a reply."""

    action: str
    body: Any
    conv: str | None


@dataclass(frozen=True, slots=True)
class Answer:
    """A client's answer to a query the session asked it (*error*: ``Kind: message``)."""

    conv: str
    body: Any
    error: str | None


class Framing(Protocol):
    def hello(self, text: str, sessions: Mapping[str, type[Session]]) -> tuple[type[Session], Any]:
        """The session class the client's first frame asks for, and what the session is
        told of the hello; raises :class:`Refused`."""

    def welcome(self, session: type[Session], address: str) -> dict[str, Any] | None:
        """The frame confirming the session, or None if the session sends its own."""

    def inbound(self, text: str) -> Request | Answer:
        """A later frame; raises :class:`BadFrame`."""

    def reply(self, conv: str, body: Any) -> dict[str, Any]: ...

    def failure(self, conv: str | None, kind: str, message: str) -> dict[str, Any]: ...

    def event(self, action: str, body: Any) -> dict[str, Any]: ...

    def query(self, conv: str, action: str, body: Any) -> dict[str, Any]: ...


class _Hello(msgspec.Struct, forbid_unknown_fields=True):
    hello: str
    protocol: int


class _Frame(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    action: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] | None = None
    body: Any = None
    id: Id | None = None
    answer: Id | None = None
    error: str | None = None


_hello = msgspec.json.Decoder(_Hello)
_frame = msgspec.json.Decoder(_Frame)


def check_protocol(cls: type[Session], version: int) -> None:
    if version != cls.protocol:
        raise Refused(
            codes.PROTOCOL_MISMATCH,
            f"session {cls.type!r} speaks protocol {cls.protocol}, not {version}",
        )


class LiveFraming:
    """``{"hello", "protocol"}``, then ``{"action", "body", "id"}`` and ``{"answer"}`` in;
    ``{"welcome"}``, ``{"reply"}``, ``{"error"}``, ``{"event"}`` and ``{"query"}`` out."""

    def hello(self, text: str, sessions: Mapping[str, type[Session]]) -> tuple[type[Session], Any]:
        try:
            hello = _hello.decode(text)
        except msgspec.DecodeError as error:
            raise Refused(codes.BAD_FRAME, f"bad hello: {error}") from None
        cls = sessions.get(hello.hello)
        if cls is None:
            there = ", ".join(sorted(sessions))
            raise Refused(
                codes.UNKNOWN_SESSION, f"no session {hello.hello[:40]!r}; there are: {there}"
            )
        check_protocol(cls, hello.protocol)
        return cls, None

    def welcome(self, session: type[Session], address: str) -> dict[str, Any] | None:
        return {
            "welcome": {"session": session.type, "protocol": session.protocol, "address": address}
        }

    def inbound(self, text: str) -> Request | Answer:
        try:
            frame = _frame.decode(text)
        except msgspec.DecodeError as error:
            raise BadFrame(str(error)) from None
        if (frame.action is None) == (frame.answer is None):
            raise BadFrame("a frame has either `action` or `answer`")
        if frame.answer is not None:
            return Answer(conv=frame.answer, body=frame.body, error=frame.error)
        conv = f"c:{frame.id}" if frame.id is not None else None
        return Request(action=frame.action or "", body=frame.body, conv=conv)

    def reply(self, conv: str, body: Any) -> dict[str, Any]:
        return {"reply": conv.removeprefix("c:"), "body": body}

    def failure(self, conv: str | None, kind: str, message: str) -> dict[str, Any]:
        error = {"type": kind, "message": message}
        return (
            {"error": error} if conv is None else {"reply": conv.removeprefix("c:"), "error": error}
        )

    def event(self, action: str, body: Any) -> dict[str, Any]:
        return {"event": action, "body": body}

    def query(self, conv: str, action: str, body: Any) -> dict[str, Any]:
        return {"query": conv, "action": action, "body": body}
