"""A server process for ``live sessions``: ``python live_echo.py PORT``; prints ``ready``."""

from __future__ import annotations

import asyncio
import sys

import uvicorn

from trawl.live import LiveApp, Node, Session, action


class Echo(Session):
    type = "echo"

    @action(client=True)
    async def echo(self, message: int) -> int:
        return message


async def main(port: int) -> None:
    config = uvicorn.Config(
        LiveApp(Node, [Echo]), host="127.0.0.1", port=port, log_level="warning", backlog=2048
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn has no started event)
        await asyncio.sleep(0.02)
    print("ready", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
