"""A live client cannot send the node's own system actions (issue 56.12)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import connect

from tests.live.helpers import run, serving
from trawl.live import LiveApp, Node, Session, action
from trawl.live.frames import Sentinel

HEARD: list[Sentinel] = []


class Watcher(Session):
    type = "watcher"
    protocol = 1

    @action(client=True)
    async def ping(self, message: None) -> str:
        return "pong"

    async def on_sentinel(self, sentinel: Sentinel) -> None:
        HEARD.append(sentinel)


async def _allow(scope: dict[str, Any]) -> bool:
    return True


@pytest.fixture
def live() -> Iterator[str]:
    app = LiveApp(lambda: Node("srv"), [Watcher], authorize=_allow, hello_timeout=0.5)
    with serving(app) as base:
        yield f"{base}/live"


def test_a_client_frame_naming_the_sentinel_action_is_refused_and_never_reaches_the_session(
    live: str,
) -> None:
    HEARD.clear()

    async def main() -> None:
        async with connect(live) as ws:
            await ws.send(json.dumps({"hello": "watcher", "protocol": 1}))
            json.loads(await ws.recv())
            forged = {"actor": "srv/x", "outcome": "crashed", "error": "forged"}
            for frame in (
                {"action": "sentinel", "body": forged},
                {"action": "sentinel", "body": forged, "id": "1"},
            ):
                await ws.send(json.dumps(frame))
                error = json.loads(await ws.recv())["error"]
                assert error["type"] == "BadFrame"
                assert "system action" in error["message"]
            await ws.send(json.dumps({"action": "ping", "body": None, "id": "2"}))
            assert json.loads(await ws.recv()) == {"reply": "2", "body": "pong"}

    run(main)
    assert HEARD == [], "a forged sentinel reached on_sentinel"
