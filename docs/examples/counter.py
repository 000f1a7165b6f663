"""A shared counter: every client adds to one total and hears each new total.

Run it with ``python docs/examples/counter.py`` and connect a WebSocket client to
ws://127.0.0.1:8000/ (see docs/live.md).
"""

from __future__ import annotations

import msgspec
import uvicorn

from trawl.live import Actor, LiveApp, Node, Sentinel, Session, action


class Add(msgspec.Struct):
    n: int


class Tally(Actor):
    """Holds the total and tells every listening session when it changes."""

    def __init__(self) -> None:
        self.total = 0
        self.listeners: set[str] = set()

    async def on_start(self) -> None:
        await self.ctx.register("tally")

    @action()
    async def add(self, message: Add) -> int:
        self.total += message.n
        for listener in self.listeners:
            await self.ctx.send(listener, "total", self.total)
        return self.total

    @action()
    async def listen(self, session: str) -> int:
        self.listeners.add(session)
        self.ctx.monitor(session)  # forget it when it ends
        return self.total

    async def on_sentinel(self, sentinel: Sentinel) -> None:
        self.listeners.discard(sentinel.actor)


class Counter(Session):
    """One per connection: {"hello": "counter", "protocol": 1}."""

    type = "counter"
    protocol = 1

    async def on_start(self) -> None:
        tally = self.ctx.lookup("tally")
        assert tally is not None, "the tally starts with the app"
        self.tally = tally
        await self.push("total", await self.ctx.ask(tally, "listen", self.ctx.address))

    @action(client=True)
    async def add(self, message: Add) -> int:
        return await self.ctx.ask(self.tally, "add", message, timeout=5)

    @action()
    async def total(self, total: int) -> None:
        await self.push("total", total)


async def start_tally(node: Node) -> None:
    node.spawn(Tally(), "tally")


app = LiveApp(Node, [Counter], setup=start_tally)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=8000)
