"""Nodes together (in one process, through a MemoryHub): remote asks, sentinels across
nodes and from dead nodes, the registry, silent nodes dropped and expelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tests.live.helpers import Counter, run, until
from trawl.live import MemoryHub, Node, NodeLost, RemoteError

FAST = {"ping_interval": 0.1, "dead_after": 0.5}


@asynccontextmanager
async def cluster(hub: MemoryHub, *names: str) -> AsyncIterator[list[Node]]:
    nodes = [await Node(n, transport=hub.transport(), **FAST).start() for n in names]
    try:
        await until(lambda: all(len(n.members) == len(names) - 1 for n in nodes), "all to meet")
        yield nodes
    finally:
        for node in nodes:
            await node.stop()


def test_asks_sends_and_sentinels_cross_nodes() -> None:
    async def main() -> None:
        async with cluster(MemoryHub(), "a", "b") as (a, b):
            counter = Counter()
            address = b.spawn(counter, "counter")
            assert await a.ask(address, "add", {"n": 2}) == 2
            await a.send(address, "add", {"n": 3})
            await until(lambda: counter.total == 5, "the send")
            with pytest.raises(RemoteError, match=r"SchemaError.*\$\.n"):
                await a.ask(address, "add", {"n": "x"})
            with pytest.raises(RemoteError, match="NoSuchActor"):
                await a.ask("b:ghost", "add", {"n": 1})
            watcher = Counter()
            a.spawn(watcher, "watcher")
            a.monitor(address, "a:watcher")
            await asyncio.sleep(0.1)  # the monitor frame travels
            with pytest.raises(RemoteError, match="RuntimeError: bang"):
                await a.ask(address, "fail", "bang")
            await until(lambda: len(watcher.sentinels) == 1, "the crash sentinel")
            (sentinel,) = watcher.sentinels
            assert (sentinel.actor, sentinel.outcome) == (address, "crashed")
            assert sentinel.error == "RuntimeError: bang"
            missing = await a.watch("b:ghost")
            assert missing.outcome == "missing"
            with pytest.raises(NodeLost, match="node c is not in the cluster"):
                await a.send("c:x", "add", {"n": 1})

    run(main)


def test_a_silent_node_is_dropped_in_bounded_time_and_its_actors_monitors_hear_once() -> None:
    async def main() -> None:
        hub = MemoryHub()
        async with cluster(hub, "a", "b", "c") as (a, b, c):
            targets = [c.spawn(Counter(), f"t{n}") for n in range(3)]
            await c.register("counting", targets[0])
            await until(lambda: a.lookup("counting") == targets[0], "the registration")
            watchers = [Counter() for _ in range(2)]
            for n, w in enumerate(watchers):
                a.spawn(w, f"w{n}")
                for t in targets:
                    a.monitor(t, f"a:w{n}")
            from_b = [b.watch(t) for t in targets]
            waiting = asyncio.create_task(a.ask(targets[1], "stall", timeout=30))
            await asyncio.sleep(0.2)
            c_loop = asyncio.get_running_loop().time()
            await hub.silence("c")  # kill -9, as the others see it
            await until(lambda: "c" not in a.members and "c" not in b.members, "c dropped", 5)
            took = asyncio.get_running_loop().time() - c_loop
            assert took <= FAST["dead_after"] + 2 * FAST["ping_interval"] + 0.3
            for w in watchers:
                await until(lambda w=w: len(w.sentinels) == 3, "three sentinels")
                assert {s.actor for s in w.sentinels} == set(targets)
                assert {s.outcome for s in w.sentinels} == {"crashed"}
                assert all("NodeLost: node c silent" in (s.error or "") for s in w.sentinels)
            assert {(await f).outcome for f in from_b} == {"crashed"}
            with pytest.raises(RemoteError, match="NodeLost"):
                await waiting  # an ask waiting on c's actor fails at once, not at its timeout
            assert a.lookup("counting") is None
            await asyncio.sleep(0.5)
            assert all(len(w.sentinels) == 3 for w in watchers), "exactly one each"

    run(main)


def test_a_node_heard_from_after_it_was_dropped_is_expelled_and_ignored() -> None:
    async def main() -> None:
        hub = MemoryHub()
        async with cluster(hub, "a", "b") as (a, b):
            watched = a.watch(b.spawn(Counter(), "t"))
            b._pinger.cancel()  # type: ignore[union-attr]  # b's loop stalls: no pings
            await until(lambda: "b" in a.dead, "b dropped", 5)
            assert (await watched).outcome == "crashed"
            await b.transport.broadcast(b'{"type":"ping","node":"b"}')
            await until(b.expelled.is_set, "b told it was expelled", 5)
            assert a.stats["from_dead_nodes"] >= 1

    run(main)


def test_mixed_lookup_prefers_a_local_provider_and_entries_leave_with_their_actor() -> None:
    async def main() -> None:
        async with cluster(MemoryHub(), "a", "b") as (a, b):
            remote = b.spawn(Counter(), "r")
            await b.register("svc", remote)
            await until(lambda: a.lookup("svc", "remote") == remote, "b's entry")
            assert a.lookup("svc", "local") is None
            assert a.lookup("svc", "mixed") == remote
            local = a.spawn(Counter(), "l")
            await a.register("svc", local)
            assert {a.lookup("svc", "mixed") for _ in range(20)} == {local}
            assert a.lookup_all("svc") == [local, remote]
            await a.stop_actor(local)
            assert a.lookup("svc", "mixed") == remote
            await b.stop_actor(remote)
            await until(lambda: a.lookup("svc") is None, "b's entry to go")
            with pytest.raises(ValueError, match="where="):
                a.lookup("svc", "nearby")  # type: ignore[arg-type]

    run(main)


def test_a_node_that_joins_late_learns_the_registry() -> None:
    async def main() -> None:
        hub = MemoryHub()
        async with cluster(hub, "a") as (a,):
            await a.register("svc", a.spawn(Counter(), "s"))
            async with cluster(hub, "late") as (late,):
                await until(lambda: late.lookup("svc") == "a:s", "the snapshot")

    run(main)
