"""WebSocket fuzz: random and malformed frames, oversized messages and floods from one
client at a time, while bystander sessions carry on. No session but the offender's may end,
and the server keeps answering. The budget is TRAWL_FUZZ_EXAMPLES connections (60)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.live.helpers import serving
from trawl.live import LiveApp, Node, Session, action

EXAMPLES = int(os.environ.get("TRAWL_FUZZ_EXAMPLES", "60"))
NODE: list[Node] = []


class Point(msgspec.Struct):
    x: int
    y: int
    tags: list[str] = []


class Target(Session):
    type = "target"

    @action(client=True)
    async def point(self, message: Point) -> int:
        return message.x + message.y

    @action(client=True)
    async def text(self, message: str) -> int:
        return len(message)

    @action(client=True)
    async def anything(self, message: Any) -> str:
        return type(message).__name__

    @action()
    async def internal(self, message: None) -> None:
        raise AssertionError("a client reached an internal action")


def _node() -> Node:
    node = Node("fuzz")
    NODE[:] = [node]
    return node


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving(LiveApp(_node, [Target], rate=50.0, burst=50, cut_after=50)) as base:
        yield base


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
shaped = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["point", "text", "anything", "internal", "nope", ""])
        | st.text(max_size=120)
    },
    optional={
        "body": json_values | st.fixed_dictionaries({"x": json_values, "y": json_values}),
        "id": st.text(max_size=120) | st.integers(),
        "answer": st.text(max_size=10),
        "extra": json_values,
    },
).map(json.dumps)
frames = st.one_of(
    shaped,
    json_values.map(json.dumps),
    st.text(max_size=300),
    st.binary(max_size=300),
    st.just("x" * 70_000),
    st.just(b"\xff" * 100),
)
hellos = st.one_of(
    st.just(json.dumps({"hello": "target", "protocol": 1})),
    st.fixed_dictionaries({"hello": json_values, "protocol": json_values}).map(json.dumps),
    st.text(max_size=50),
)


async def _send_all(ws: ClientConnection, hello: str, batch: list[str | bytes], flood: int) -> None:
    try:
        await ws.send(hello)
        for frame in batch:
            await ws.send(frame)
        for _ in range(flood):
            await ws.send(json.dumps({"action": "text", "body": "flood"}))
        async with asyncio.timeout(0.5):
            while True:
                await ws.recv()
    except (ConnectionClosed, TimeoutError):
        pass


async def _bystander_ok(ws: ClientConnection, n: int) -> None:
    await ws.send(json.dumps({"action": "point", "body": {"x": n, "y": 1}, "id": str(n)}))
    assert json.loads(await asyncio.wait_for(ws.recv(), 5)) == {"reply": str(n), "body": n + 1}


def test_fuzzed_clients_harm_no_other_session_and_the_server_keeps_answering(server: str) -> None:
    url = f"{server}/live"

    async def open_bystander() -> ClientConnection:
        ws = await connect(url)
        await ws.send(json.dumps({"hello": "target", "protocol": 1}))
        assert "welcome" in json.loads(await ws.recv())
        return ws

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(hello=hellos, batch=st.lists(frames, max_size=12), flood=st.sampled_from([0, 0, 0, 200]))
    def one_offender(hello: str, batch: list[str | bytes], flood: int) -> None:
        async def main() -> None:
            bystanders = [await open_bystander() for _ in range(3)]
            try:
                async with connect(url, max_size=None) as ws:
                    await _send_all(ws, hello, batch, flood)
                for n, ws in enumerate(bystanders):
                    await _bystander_ok(ws, n)
            finally:
                for ws in bystanders:
                    await ws.close()

        asyncio.run(main())

    one_offender()
    node = NODE[0]
    assert node.stats["actors_crashed"] == 0
    assert node.stats["actors_done"] >= EXAMPLES * 3, "the bystanders, at least, ended cleanly"
    # Every session ended with its connection: none is left behind, none crashed.
    for _ in range(100):
        if not node.actors():
            break
        asyncio.run(asyncio.sleep(0.05))
    assert node.actors() == []
