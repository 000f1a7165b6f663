"""A real tracker server over a fresh database on each backend, with pipelines to connect
as, and a raw protocol client that speaks the frames docs/protocol.md describes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.api.conftest import serving
from trawl.model import wire
from trawl.store.store import Store


@dataclass
class Tracker:
    base: str  # http://127.0.0.1:PORT
    db: str
    tokens: dict[str, str] = field(default_factory=dict)  # pipeline id -> token

    @property
    def ws(self) -> str:
        return self.base.replace("http://", "ws://")

    def pipeline(
        self,
        pipeline_id: str,
        *,
        tags: tuple[str, ...] = (),
        match_only: bool = False,
        slots: int = 4,
    ) -> str:
        with Store(self.db) as store:
            token = store.pipelines.create(
                pipeline_id, tags=tags, match_only=match_only, slots=slots, now=store.clock()
            )
        self.tokens[pipeline_id] = token
        return token


@pytest.fixture
def tracker(db_url: str) -> Iterator[Tracker]:
    with serving(db_url, token_cache=0.0, pipeline_watch=0.2) as base:
        yield Tracker(base=base, db=db_url)


def task_spec(name: str = "work", tags: tuple[str, ...] = ("t",), **extra: Any) -> dict[str, Any]:
    return {"name": name, "version": "1", "timeout": 60, "tags": list(tags), **extra}


def hello(
    tasks: list[dict[str, Any]] | None = None, slots: int = 4, **extra: Any
) -> dict[str, Any]:
    return {
        "v": wire.VERSION,
        "protocol": wire.PROTOCOL,
        "slots": slots,
        "owner": "test:1:abc",
        "tasks": tasks if tasks is not None else [task_spec()],
        **extra,
    }


class Raw:
    """One pipeline connection, frames in and out as JSON."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.seq = 0
        self.advisories: list[dict[str, Any]] = []

    async def send(self, frame: Any) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = 10) -> dict[str, Any]:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            frame: dict[str, Any] = json.loads(await self.ws.recv())
            return frame

    async def request(self, kind: str, request: Any = None) -> dict[str, Any]:
        """The reply to a request (advisories that come first are kept in order)."""
        self.seq += 1
        await self.send({"type": kind, "seq": self.seq, "request": request})
        while True:
            frame = await self.recv()
            if frame.get("seq") is None and "type" in frame:
                self.advisories.append(frame)
                continue
            assert frame["seq"] == self.seq, frame
            return frame

    async def requests(self, kind: str, requests: list[Any]) -> list[dict[str, Any]]:
        """The replies to *requests*, all sent before any reply is read (in flight at once,
        as a pipeline's fetches ask), in the order sent."""
        first = self.seq + 1
        for request in requests:
            self.seq += 1
            await self.send({"type": kind, "seq": self.seq, "request": request})
        replies: dict[int, dict[str, Any]] = {}
        while len(replies) < len(requests):
            frame = await self.recv()
            if frame.get("seq") is None and "type" in frame:
                self.advisories.append(frame)
                continue
            replies[frame["seq"]] = frame
        return [replies[seq] for seq in range(first, self.seq + 1)]

    async def ok(self, kind: str, request: Any = None) -> Any:
        reply = await self.request(kind, request)
        assert reply["status"] == "ok", reply
        return reply["payload"]

    async def advisory(self, kind: str, timeout: float = 15) -> dict[str, Any]:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            while True:
                for frame in self.advisories:
                    if frame["type"] == kind:
                        self.advisories.remove(frame)
                        return frame
                frame = await self.recv(timeout)
                self.advisories.append(frame)


def headers(pipeline: str, token: str) -> dict[str, str]:
    return {"X-Trawl-Pipeline": pipeline, "Authorization": f"Bearer {token}"}


async def join(tracker: Tracker, pipeline: str, **hello_args: Any) -> tuple[Raw, dict[str, Any]]:
    """Connect as *pipeline*, say hello, and return the connection and its welcome."""
    ws = await connect(
        tracker.ws + wire.PATH, additional_headers=headers(pipeline, tracker.tokens[pipeline])
    )
    raw = Raw(ws)
    await raw.send(hello(**hello_args))
    welcome = await raw.recv()
    assert welcome["type"] == "welcome", welcome
    return raw, welcome["payload"]
