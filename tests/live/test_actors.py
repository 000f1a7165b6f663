"""Actors on one node: schema gates, start and stop, spawn, replace, daemons, mailboxes."""

from __future__ import annotations

import asyncio

import pytest

from tests.live.helpers import Add, Counter, run, until
from trawl.live import (
    Actor,
    BadAddress,
    Node,
    NoSuchActor,
    RemoteError,
    Sentinel,
    action,
    daemon,
)


def test_a_message_that_does_not_match_the_schema_never_reaches_the_handler() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            counter = Counter()
            address = node.spawn(counter, "counter")
            await node.send(address, "add", {"n": "two"})
            await node.send(address, "add", {"m": 2})
            with pytest.raises(RemoteError) as asked:
                await node.ask(address, "add", {"n": [1]})
            assert await node.ask(address, "add", Add(3)) == 3
            assert await node.ask(address, "add", {"n": 4}) == 7
            assert counter.seen == [Add(3), Add(4)]
            assert node.stats["schema_rejected"] == 3
            assert asked.value.kind == "SchemaError"
            assert "$.n" in asked.value.message, "the error names the field"

    run(main)


def test_an_unknown_action_is_refused_and_counted() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            address = node.spawn(Counter(), "counter")
            with pytest.raises(RemoteError, match="has no action 'nope'"):
                await node.ask(address, "nope", None)
            assert node.stats["unknown_action"] == 1

    run(main)


def test_bad_addresses_and_names_are_refused_with_what_was_wrong() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            with pytest.raises(BadAddress, match="expected node:actor"):
                await node.send("no-colon", "add", None)
            with pytest.raises(BadAddress, match="no ':'"):
                node.spawn(Counter(), "a:b")
            with pytest.raises(NoSuchActor, match="no actor at n1:ghost"):
                await node.send("n1:ghost", "add", None)
            node.spawn(Counter(), "c")
            with pytest.raises(ValueError, match="already runs"):
                node.spawn(Counter(), "c")
            with pytest.raises(TypeError, match="Actor instance"):
                node.spawn("not an actor", "x")  # type: ignore[arg-type]

    run(main)
    with pytest.raises(BadAddress):
        Node("bad name")


class Lifecycle(Actor):
    def __init__(self, log: list[str], delay: float = 0.0) -> None:
        self.log, self.delay = log, delay

    async def on_start(self) -> None:
        self.log.append("start")
        await asyncio.sleep(self.delay)
        self.log.append("started")

    async def on_stop(self) -> None:
        self.log.append("stop")

    @action()
    async def ping(self, message: None) -> str:
        self.log.append("ping")
        return "pong"


def test_on_start_runs_before_the_first_message_and_on_stop_after_the_last() -> None:
    async def main() -> None:
        log: list[str] = []
        async with Node("n1") as node:
            address = node.spawn(Lifecycle(log, delay=0.2))
            assert await node.ask(address, "ping") == "pong"
            await node.stop_actor(address)
            assert log == ["start", "started", "ping", "stop"]
            assert address not in node.actors()

    run(main)


def test_a_slow_on_start_does_not_hold_up_other_actors() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            slow = node.spawn(Lifecycle([], delay=1.5))
            fast = node.spawn(Counter())
            started = asyncio.get_running_loop().time()
            assert await node.ask(fast, "add", {"n": 1}) == 1
            assert asyncio.get_running_loop().time() - started < 0.75
            assert await node.ask(slow, "ping", timeout=10) == "pong"

    run(main)


class Parent(Actor):
    def __init__(self) -> None:
        self.sentinels: list[Sentinel] = []
        self.child = ""

    @action()
    async def make(self, message: None) -> str:
        self.child = self.ctx.spawn(Counter())
        return self.child

    async def on_sentinel(self, sentinel: Sentinel) -> None:
        self.sentinels.append(sentinel)


def test_a_parent_hears_once_how_its_children_ended() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            parent = Parent()
            address = node.spawn(parent)
            done = await node.ask(address, "make")
            crashed = await node.ask(address, "make")
            stopped = await node.ask(address, "make")
            await node.ask(done, "halt")
            with pytest.raises(RemoteError, match="RuntimeError: boom"):
                await node.ask(crashed, "fail", "boom")
            await node.stop_actor(stopped)
            await until(lambda: len(parent.sentinels) == 3, "three sentinels")
            await asyncio.sleep(0.2)
            got = {s.actor: (s.outcome, s.error) for s in parent.sentinels}
            assert got == {
                done: ("done", None),
                crashed: ("crashed", "RuntimeError: boom"),
                stopped: ("done", None),
            }
            assert len(parent.sentinels) == 3

    run(main)


def test_monitoring_an_actor_that_is_gone_says_missing_and_node_stop_says_cancelled() -> None:
    async def main() -> None:
        node = await Node("n1").start()
        missing = await node.watch("n1:nobody")
        assert (missing.outcome, missing.actor) == ("missing", "n1:nobody")
        address = node.spawn(Counter())
        watched = node.watch(address)
        await node.stop()
        assert (await watched).outcome == "cancelled"

    run(main)


class Old(Actor):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    @action()
    async def old(self, message: None) -> str:
        return "old"

    @action()
    async def become(self, message: None) -> str:
        await self.ctx.replace(New(self.log))
        return "replaced"

    @daemon(restart="always")
    async def beat(self) -> None:
        self.log.append("old beat")
        await asyncio.sleep(0.05)


class New(Actor):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def on_start(self) -> None:
        self.log.append("new start")

    @action()
    async def new(self, message: None) -> str:
        return "new"


def test_replace_drops_the_old_handlers_and_daemons() -> None:
    async def main() -> None:
        log: list[str] = []
        async with Node("n1") as node:
            address = node.spawn(Old(log))
            assert await node.ask(address, "old") == "old"
            await until(lambda: log.count("old beat") >= 2, "the old daemon to beat")
            assert await node.ask(address, "become") == "replaced"
            beats = log.count("old beat")
            await asyncio.sleep(0.3)
            assert log.count("old beat") == beats, "the old daemon still runs"
            assert "new start" in log
            assert await node.ask(address, "new") == "new"
            with pytest.raises(RemoteError, match="UnknownAction"):
                await node.ask(address, "old")

    run(main)


class Flaky(Actor):
    def __init__(self, restart: str, dead_man: bool = False) -> None:
        self.runs = 0
        type(self)._restart = restart

    @daemon(restart="on_failure", max_restarts=2, within=60)
    async def flaky(self) -> None:
        self.runs += 1
        raise RuntimeError(f"run {self.runs}")

    @action()
    async def runs_so_far(self, message: None) -> int:
        return self.runs


class Guarded(Actor):
    @daemon(restart="never", dead_man=True)
    async def guard(self) -> None:
        await asyncio.sleep(0.1)
        raise ConnectionError("upstream gone")


class Finite(Actor):
    @daemon(restart="never", dead_man=True)
    async def guard(self) -> None:
        await asyncio.sleep(0.1)


def test_a_daemon_is_restarted_by_its_policy_and_a_dead_mans_daemon_takes_the_actor() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            flaky = node.spawn(Flaky("on_failure"))
            await until(lambda: node.stats["daemon_restarts"] == 2, "two restarts")
            await asyncio.sleep(0.5)
            assert await node.ask(flaky, "runs_so_far") == 3, "1 run and 2 restarts, then given up"
            crashed = await node.watch(node.spawn(Guarded()))
            assert (crashed.outcome, crashed.error) == ("crashed", "ConnectionError: upstream gone")
            ended = await node.watch(node.spawn(Finite()))
            assert ended.outcome == "cancelled"

    run(main)


class Slow(Actor):
    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate
        self.handled = 0

    @action()
    async def work(self, message: int) -> None:
        await self.gate.wait()
        self.handled += 1


def test_a_full_mailbox_holds_the_sender_back_and_is_counted_never_dropped() -> None:
    async def main() -> None:
        gate = asyncio.Event()
        async with Node("n1", mailbox_size=5) as node:
            slow = Slow(gate)
            address = node.spawn(slow)
            sent = 0

            async def sender() -> None:
                nonlocal sent
                for n in range(20):
                    await node.send(address, "work", n)
                    sent += 1

            task = asyncio.create_task(sender())
            await asyncio.sleep(0.3)
            assert sent == 6, "one in the handler, five in the mailbox, the sender waits"
            assert node.stats["mailbox_full"] >= 1
            gate.set()
            await task
            await until(lambda: slow.handled == 20, "all 20 handled")

    run(main)


def test_declarations_that_cannot_work_are_refused_at_once() -> None:
    with pytest.raises(TypeError, match="async def"):

        class Sync(Actor):
            @action()
            def nope(self, message: int) -> None:  # type: ignore[type-var]
                pass

    with pytest.raises(TypeError, match="takes"):

        class NoMessage(Actor):
            @action()
            async def nope(self) -> None:
                pass

    with pytest.raises(ValueError, match="restart="):
        daemon(restart="sometimes")  # type: ignore[arg-type]


class Desk(Actor):
    """A slow concurrent action beside a quick one."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.waiting = 0

    @action(concurrent=True)
    async def slow(self, message: int) -> int:
        self.waiting += 1
        await self.gate.wait()
        return message * 2

    @action()
    async def quick(self, message: int) -> int:
        return message + 1

    @action()
    async def open(self, message: None) -> None:
        self.gate.set()

    @action(concurrent=True)
    async def broken(self, message: None) -> None:
        raise RuntimeError("broken on purpose")


def test_a_concurrent_action_lets_the_mailbox_move_on_and_answers_when_done() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            desk = Desk()
            address = node.spawn(desk, "desk")
            slow = [asyncio.create_task(node.ask(address, "slow", n)) for n in range(3)]
            await until(lambda: desk.waiting == 3, "three slow actions running at once")
            assert await node.ask(address, "quick", 1) == 2  # not behind the slow ones
            assert not any(task.done() for task in slow)
            await node.send(address, "open", None)
            assert await asyncio.gather(*slow) == [0, 2, 4]

    run(main)


def test_stopping_an_actor_cancels_its_concurrent_actions_and_tells_the_askers() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            desk = Desk()
            address = node.spawn(desk, "desk")
            stopped = node.watch(address)
            asked = asyncio.create_task(node.ask(address, "slow", 1))
            await until(lambda: desk.waiting == 1, "the slow action to start")
            await node.stop_actor(address)
            with pytest.raises(RemoteError) as told:
                await asked
            assert told.value.kind == "ActorStopped"
            assert (await stopped).outcome == "done"

    run(main)


def test_a_concurrent_action_that_raises_crashes_its_actor_after_answering() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            address = node.spawn(Desk(), "desk")
            stopped = node.watch(address)
            with pytest.raises(RemoteError, match="broken on purpose"):
                await node.ask(address, "broken", None)
            ended = await stopped
            assert ended.outcome == "crashed"
            assert "broken on purpose" in (ended.error or "")

    run(main)


class Quitter(Actor):
    """Stops itself from a daemon, with no message in hand."""

    @daemon(restart="never")
    async def quit_soon(self) -> None:
        await asyncio.sleep(0.05)
        self.ctx.stop()
        await asyncio.sleep(3600)  # stopping cancels this daemon


def test_an_actor_that_stops_itself_from_a_daemon_stops_at_once() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            address = node.spawn(Quitter(), "quitter")
            async with asyncio.timeout(5):
                ended = await node.watch(address)
            assert ended.outcome == "done"

    run(main)
