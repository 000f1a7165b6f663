"""WebSocket sessions on a real server: hello, schema gates, queries, closing both ways,
pacing, oversized frames, authorization."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.live.helpers import run, serving
from trawl.live import AskTimeout, LiveApp, Node, Session, action

STOPPED: list[str] = []


class Say(msgspec.Struct):
    text: str
    loud: bool = False


class Chat(Session):
    type = "chat"
    protocol = 2

    def __init__(self) -> None:
        self.heard: list[Say] = []

    @action(client=True)
    async def say(self, message: Say) -> dict[str, Any]:
        self.heard.append(message)
        return {
            "echo": message.text.upper() if message.loud else message.text,
            "n": len(self.heard),
        }

    @action(client=True)
    async def confirm(self, message: float) -> Any:
        try:
            return await self.query("sure", {"question": "really?"}, timeout=message)
        except AskTimeout:
            return "no answer"

    @action(client=True)
    async def leave(self, message: None) -> None:
        self.ctx.stop()

    @action(client=True)
    async def explode(self, message: None) -> None:
        raise RuntimeError("boom")

    @action(client=True)
    async def tell(self, message: str) -> str:
        """Have another actor push to this session, as an operator's command would."""
        await self.ctx.send(self.ctx.address, "relay", message)
        return "ok"

    @action()
    async def relay(self, message: str) -> None:
        await self.push("relayed", message)

    @action()
    async def internal(self, message: None) -> str:
        return "secret"

    async def on_stop(self) -> None:
        STOPPED.append(self.ctx.address)


async def _deny_without_token(scope: dict[str, Any]) -> bool:
    return b"token=good" in scope.get("query_string", b"")


@pytest.fixture
def live() -> Iterator[str]:
    app = LiveApp(
        lambda: Node("srv"),
        [Chat],
        authorize=_deny_without_token,
        hello_timeout=0.5,
        max_frame=4096,
    )
    with serving(app) as base:
        yield f"{base}/live?token=good"


async def hello(ws: ClientConnection, session: str = "chat", protocol: int = 2) -> dict[str, Any]:
    await ws.send(json.dumps({"hello": session, "protocol": protocol}))
    return json.loads(await ws.recv())


async def call(
    ws: ClientConnection, action: str, body: Any = None, id: str | None = "1"
) -> dict[str, Any]:
    frame: dict[str, Any] = {"action": action, "body": body}
    if id is not None:
        frame["id"] = id
    await ws.send(json.dumps(frame))
    return json.loads(await ws.recv())


async def closed(ws: ClientConnection) -> tuple[int | None, str]:
    async def drain() -> None:
        while True:
            await asyncio.wait_for(ws.recv(), 5)

    with pytest.raises(ConnectionClosed):
        await drain()
    assert ws.close_code is not None
    return ws.close_code, ws.close_reason or ""


def test_hello_starts_the_session_and_a_bad_one_closes_with_a_code_saying_why(live: str) -> None:
    async def main() -> None:
        async with connect(live) as ws:
            welcome = await hello(ws)
            assert welcome["welcome"]["session"] == "chat"
            assert welcome["welcome"]["address"].startswith("srv:chat-")
        cases = [
            ({"hello": "chat", "protocol": 1}, 4426, "speaks protocol 2, not 1"),
            ({"hello": "nope", "protocol": 2}, 4404, "there are: chat"),
            ({"hello": "chat"}, 4400, "protocol"),
            ("not json", 4400, "bad hello"),
        ]
        for frame, code, reason in cases:
            async with connect(live) as ws:
                await ws.send(frame if isinstance(frame, str) else json.dumps(frame))
                got = await closed(ws)
                assert got[0] == code, got
                assert reason in got[1], got
        async with connect(live) as ws:
            assert await closed(ws) == (4408, "no hello within 0.5s")

    run(main)


def test_a_frame_that_does_not_match_its_schema_never_reaches_the_handler(live: str) -> None:
    async def main() -> None:
        async with connect(live) as ws:
            await hello(ws)
            assert await call(ws, "say", {"text": "hi"}) == {
                "reply": "1",
                "body": {"echo": "hi", "n": 1},
            }
            bad = await call(ws, "say", {"text": 5}, id="2")
            assert bad["reply"] == "2"
            assert bad["error"]["type"] == "SchemaError"
            assert "$.text" in bad["error"]["message"]
            assert (await call(ws, "internal", None, id="3"))["error"]["type"] == "UnknownAction"
            assert (
                "that a client may call"
                in (await call(ws, "internal", None, id="3"))["error"]["message"]
            )
            assert (await call(ws, "nope", None, id=None))["error"]["type"] == "UnknownAction"
            for junk in [
                "{",
                "[]",
                '{"action": "say", "answer": "x"}',
                '{"body": 1}',
                '{"action": "say", "extra": 1}',
            ]:
                await ws.send(junk)
                assert json.loads(await ws.recv())["error"]["type"] == "BadFrame", junk
            assert await call(ws, "say", {"text": "still", "loud": True}, id="4") == {
                "reply": "4",
                "body": {"echo": "STILL", "n": 2},
            }, "the session is unharmed and the bad frames never reached it"

    run(main)


def test_the_server_queries_the_client_with_a_timeout(live: str) -> None:
    async def main() -> None:
        async with connect(live) as ws:
            await hello(ws)
            await ws.send(json.dumps({"action": "confirm", "body": 2.0, "id": "q"}))
            query = json.loads(await ws.recv())
            assert (query["action"], query["body"]) == ("sure", {"question": "really?"})
            await ws.send(json.dumps({"answer": "forged", "body": "yes"}))
            assert "no query 'forged'" in json.loads(await ws.recv())["error"]["message"]
            await ws.send(json.dumps({"answer": query["query"], "body": "yes"}))
            assert json.loads(await ws.recv()) == {"reply": "q", "body": "yes"}
            await ws.send(json.dumps({"action": "confirm", "body": 0.2, "id": "q2"}))
            json.loads(await ws.recv())  # the query; we never answer it
            assert json.loads(await ws.recv()) == {"reply": "q2", "body": "no answer"}

    run(main)


def test_stopping_the_session_closes_the_socket_and_closing_the_socket_stops_it(live: str) -> None:
    async def main() -> None:
        async with connect(live) as ws:
            await hello(ws)
            await ws.send(json.dumps({"action": "leave"}))
            assert await closed(ws) == (1000, "the session ended")
        async with connect(live) as ws:
            await hello(ws)
            await ws.send(json.dumps({"action": "explode", "id": "x"}))
            reply = json.loads(await ws.recv())
            assert reply["error"] == {"type": "RuntimeError", "message": "boom"}
            assert await closed(ws) == (1011, "the session crashed")
        before = len(STOPPED)
        async with connect(live) as ws:
            address = (await hello(ws))["welcome"]["address"]
            assert (await call(ws, "tell", "from an actor"))["body"] == "ok"
            assert json.loads(await ws.recv()) == {"event": "relayed", "body": "from an actor"}
        for _ in range(100):
            if address in STOPPED:
                break
            await asyncio.sleep(0.05)
        assert STOPPED[before:] == [address], "the session stopped when its socket closed"

    run(main)


def test_an_over_rate_client_is_slowed_then_cut(
    live: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with connect(live) as ws:
            await hello(ws)
            started = loop.time()
            for n in range(10):  # the burst: answered at once
                await call(ws, "say", {"text": str(n)}, id=str(n))
            assert loop.time() - started < 1.0
            started = loop.time()
            for n in range(4):  # past the burst: one every half second
                await call(ws, "say", {"text": str(n)}, id=str(n))
            assert loop.time() - started >= 1.4, "frames past the burst are slowed to 2/s"
            slowed = [r.getMessage() for r in caplog.records if "are slowed" in r.getMessage()]
            assert len(slowed) == 1, "warned once, not for every frame slowed"
            assert "sends over 2 frames/s" in slowed[0]
            for _ in range(40):  # a flood: cut once ten frames behind
                await ws.send(json.dumps({"action": "say", "body": {"text": "x"}}))
            code, reason = await closed(ws)
            assert (code, reason) == (4429, "over 2 frames/s for too long")

    run(main)


def test_oversized_frames_close_the_connection_and_no_token_is_refused(live: str) -> None:
    async def main() -> None:
        async with connect(live) as ws:
            await hello(ws)
            await ws.send(json.dumps({"action": "say", "body": {"text": "x" * 5000}}))
            assert (await closed(ws))[0] == 1009
        with pytest.raises(InvalidStatus) as refused:
            async with connect(live.replace("token=good", "token=bad")):
                pass
        assert refused.value.response.status_code == 401

    run(main)
