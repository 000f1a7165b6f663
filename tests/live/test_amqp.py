"""The cluster over the real RabbitMQ: asks across nodes, and kill -9 of one of three
node processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.live.helpers import Counter, run, until
from tests.live.services import amqp_url  # noqa: F401  (a fixture)
from trawl.live import AmqpTransport, Node, RemoteError

ROOT = Path(__file__).resolve().parents[2]


def test_two_nodes_over_rabbitmq_ask_and_monitor_each_other(amqp_url: str) -> None:  # noqa: F811
    cluster = uuid.uuid4().hex[:8]

    async def main() -> None:
        fast = {"ping_interval": 0.2, "dead_after": 1.5}
        async with (
            Node("a", transport=AmqpTransport(amqp_url, cluster), **fast) as a,
            Node("b", transport=AmqpTransport(amqp_url, cluster), **fast) as b,
        ):
            await until(lambda: "b" in a.members and "a" in b.members, "the nodes to meet")
            counter = Counter()
            address = b.spawn(counter, "counter")
            answers = await asyncio.gather(*(a.ask(address, "add", {"n": 1}) for _ in range(50)))
            assert sorted(answers) == list(range(1, 51))
            with pytest.raises(RemoteError, match="SchemaError"):
                await a.ask(address, "add", {"n": None})
            await b.register("svc", address)
            await until(lambda: a.lookup("svc") == address, "the registration")
            ended = a.watch(address)
            await asyncio.sleep(0.2)
            await b.stop_actor(address)
            assert (await ended).outcome == "done"
            await until(lambda: a.lookup("svc") is None, "the entry to go")

    run(main)


@pytest.mark.slow
def test_kill_9_of_one_of_three_node_processes(amqp_url: str, tmp_path: Path) -> None:  # noqa: F811
    cluster = uuid.uuid4().hex[:8]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def start(name: str, *watch: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.live.node_proc", amqp_url, cluster, name, *watch],
            stdout=subprocess.PIPE,
            stderr=open(tmp_path / f"{name}.log", "w"),  # noqa: SIM115
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", (tmp_path / f"{name}.log").read_text()
        return proc

    victim_targets = ["c:t0", "c:t1"]
    procs = [start("b", *victim_targets), start("c")]
    try:

        async def main() -> None:
            async with Node(
                "a", transport=AmqpTransport(amqp_url, cluster), ping_interval=0.2, dead_after=1.5
            ) as a:
                await until(lambda: {"b", "c"} <= set(a.members), "b and c", 10)
                assert await a.ask("c:t0", "hello") == "c:t0"
                await a.ask("b:watcher", "watch")
                here = [a.watch(t) for t in victim_targets]
                await until(lambda: len(a.lookup_all("work", "remote")) == 4, "4 providers", 10)
                await asyncio.sleep(0.3)  # the monitor frames reach c
                killed = asyncio.get_running_loop().time()
                procs[1].send_signal(signal.SIGKILL)
                heard = await asyncio.gather(*here)
                took = asyncio.get_running_loop().time() - killed
                assert {(s.actor, s.outcome) for s in heard} == {
                    (t, "crashed") for t in victim_targets
                }
                assert all("NodeLost: node c silent" in (s.error or "") for s in heard)
                assert took < 1.5 + 0.2 * 3 + 1.0, f"dropped after {took:.1f}s"
                assert "c" not in a.members
                assert sorted(a.lookup_all("work", "remote")) == ["b:t0", "b:t1"]
                await until_b_heard(a)

        async def until_b_heard(a: Node) -> None:
            for _ in range(100):
                heard = await a.ask("b:watcher", "sentinels")
                if len(heard) >= 2:
                    break
                await asyncio.sleep(0.1)
            assert sorted(h[:2] for h in heard) == [[t, "crashed"] for t in victim_targets]
            await asyncio.sleep(0.5)
            assert len(await a.ask("b:watcher", "sentinels")) == 2, "exactly one each"

        run(main, timeout=60)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
