"""docs/live.md's example runs, and the page shows it as it is."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

from websockets.asyncio.client import connect

from tests.live.helpers import serving

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_counter_example_runs_and_is_the_one_the_page_shows() -> None:
    source = DOCS / "examples" / "counter.py"
    assert source.read_text().strip() in (DOCS / "live.md").read_text()
    spec = importlib.util.spec_from_file_location("counter_example", source)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    with serving(module.app) as base:

        async def client() -> list[dict[str, object]]:
            async with connect(base) as one, connect(base) as two:
                for ws in (one, two):
                    await ws.send(json.dumps({"hello": "counter", "protocol": 1}))
                    assert "welcome" in json.loads(await ws.recv())
                    assert json.loads(await ws.recv()) == {"event": "total", "body": 0}
                await one.send(json.dumps({"action": "add", "body": {"n": 5}, "id": "a"}))
                heard_one = [json.loads(await one.recv()) for _ in range(2)]
                heard_two = json.loads(await two.recv())
                assert heard_two == {"event": "total", "body": 5}
                return heard_one

        heard = asyncio.run(client())
        assert {"reply": "a", "body": 5} in heard
        assert {"event": "total", "body": 5} in heard
