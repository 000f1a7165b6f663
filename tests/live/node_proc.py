"""A node in a process of its own, for the kill -9 test: ``python -m tests.live.node_proc
AMQP_URL CLUSTER NAME [WATCH...]``. It runs two actors (``NAME:t0``, ``NAME:t1``, offering
the service ``work``) and a ``NAME:watcher`` that monitors each WATCH address and answers
``sentinels`` with what it has heard. It prints ``ready`` once it is in the cluster."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from trawl.live import Actor, AmqpTransport, Node, Sentinel, action


class Target(Actor):
    @action()
    async def hello(self, message: None) -> str:
        return self.ctx.address


class Watcher(Actor):
    def __init__(self, targets: list[str]) -> None:
        self.targets = targets
        self.heard: list[Sentinel] = []

    @action()
    async def watch(self, message: None) -> None:
        for target in self.targets:
            self.ctx.monitor(target)

    @action()
    async def sentinels(self, message: None) -> list[Any]:
        return [[s.actor, s.outcome, s.error] for s in self.heard]

    async def on_sentinel(self, sentinel: Sentinel) -> None:
        self.heard.append(sentinel)


async def main(url: str, cluster: str, name: str, watch: list[str]) -> None:
    node = Node(name, transport=AmqpTransport(url, cluster), ping_interval=0.2, dead_after=1.5)
    async with node:
        for n in range(2):
            await node.register("work", node.spawn(Target(), f"t{n}"))
        node.spawn(Watcher(watch), "watcher")
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
