"""The pipeline protocol's frames (docs/protocol.md) on the live layer's sessions.

In: a :class:`~trawl.model.wire.Hello`, then requests ``{"type", "seq", "request"}`` and
answers to the server's queries ``{"status", "payload", "seq"}``. Out: replies
``{"status", "payload", "seq"}``, advisories ``{"type", "seq": null, "payload"}`` and
queries ``{"type", "seq": "<id>", "request"}``. A request's ``seq`` is the pipeline's
(an integer); the reply carries it back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from trawl.live import session as codes
from trawl.live.framing import Answer, BadFrame, Refused, Request
from trawl.live.session import Session
from trawl.model import wire

SESSION = "pipeline"
_hello = msgspec.json.Decoder(wire.Hello)
_any = msgspec.json.Decoder()
_request = msgspec.json.Decoder(wire.RequestFrame)
_reply = msgspec.json.Decoder(wire.ReplyFrame)
_AT = re.compile(r" - at `\$\.?(?P<field>[^`]*)`$")


class PipelineFraming:
    def hello(self, text: str, sessions: Mapping[str, type[Session]]) -> tuple[type[Session], Any]:
        try:
            version = _any.decode(text).get("v")
        except (msgspec.DecodeError, AttributeError):
            raise Refused(codes.BAD_FRAME, "the first frame must be a JSON hello object") from None
        if version != wire.VERSION:
            raise Refused(
                codes.PROTOCOL_MISMATCH,
                f"this server speaks pipeline protocol version {wire.VERSION}, not {version!r}",
            )
        try:
            hello = _hello.decode(text)
        except msgspec.DecodeError as error:
            raise Refused(codes.BAD_FRAME, f"bad hello: {error}") from None
        return sessions[SESSION], hello

    def welcome(self, session: type[Session], address: str) -> dict[str, Any] | None:
        return None  # the session says it, once it knows what the pipeline may claim

    def inbound(self, text: str) -> Request | Answer:
        try:
            shape = _any.decode(text)
        except msgspec.DecodeError as error:
            raise BadFrame(f"not JSON: {error}") from None
        if not isinstance(shape, dict):
            raise BadFrame("a frame is a JSON object")
        try:
            if "status" in shape:
                reply = _reply.decode(text)
                return Answer(conv=str(reply.seq), body=reply.payload, error=_error(reply))
            request = _request.decode(text)
        except msgspec.ValidationError as error:
            raise BadFrame(str(error)) from None
        return Request(action=request.type, body=request.request, conv=f"c:{request.seq}")

    def reply(self, conv: str, body: Any) -> dict[str, Any]:
        return {"status": "ok", "payload": body, "seq": _seq(conv)}

    def failure(self, conv: str | None, kind: str, message: str) -> dict[str, Any]:
        problem: dict[str, Any] = {"type": kind, "message": message}
        found = _AT.search(message)
        if found:
            problem["field"] = found.group("field")
        return {"status": "error", "payload": problem, "seq": None if conv is None else _seq(conv)}

    def event(self, action: str, body: Any) -> dict[str, Any]:
        return {"type": action, "seq": None, "payload": body}

    def query(self, conv: str, action: str, body: Any) -> dict[str, Any]:
        return {"type": action, "seq": conv, "request": body}


def _error(reply: wire.ReplyFrame) -> str | None:
    if reply.status != "error":
        return None
    problem = reply.payload if isinstance(reply.payload, dict) else {}
    return f"{problem.get('type', 'Error')}: {problem.get('message', '')}"


def _seq(conv: str) -> int | str:
    if conv.startswith("c:"):
        return int(conv[2:])
    return conv
