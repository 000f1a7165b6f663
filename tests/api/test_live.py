"""The API's application serves the live layer's sessions at /live, behind its tokens."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.api.conftest import make_tokens, serving
from trawl.live import Session, action
from trawl.server.live import Live, load_sessions


class Echo(Session):
    type = "echo"

    @action(client=True)
    async def echo(self, message: str) -> str:
        return message


def test_sessions_share_the_api_server_and_its_tokens(db_url: str) -> None:
    tokens = make_tokens(db_url)
    with serving(db_url, live=Live([Echo])) as base:
        ws_base = base.replace("http://", "ws://") + "/live"

        async def main() -> None:
            for url, headers in [
                (f"{ws_base}?token={tokens['read']}", {}),
                (ws_base, {"Authorization": f"Bearer {tokens['admin']}"}),
            ]:
                async with connect(url, additional_headers=headers) as ws:
                    await ws.send(json.dumps({"hello": "echo", "protocol": 1}))
                    assert "welcome" in json.loads(await ws.recv())
                    await ws.send(json.dumps({"action": "echo", "body": "hi", "id": "1"}))
                    assert json.loads(await ws.recv()) == {"reply": "1", "body": "hi"}
            for url in [ws_base, f"{ws_base}?token=trawl_1_wrong"]:
                with pytest.raises(InvalidStatus) as refused:
                    async with connect(url):
                        pass
                assert refused.value.response.status_code == 401

        asyncio.run(main())
        health = httpx.get(f"{base}/health")
        assert health.status_code == 200


def test_session_classes_named_on_the_command_line_are_checked() -> None:
    assert load_sessions(["tests.api.test_live:Echo"]) == [Echo]
    for spec, match in [
        ("nocolon", "expected module:Class"),
        ("tests.api.test_live:Missing", "Missing"),
        ("no.such.module:X", "No module named"),
        ("tests.api.test_live:Live", "not a trawl.live.Session subclass"),
    ]:
        with pytest.raises(ValueError, match=match):
            load_sessions([spec])
