"""Asks, multi-step conversations, timeouts, cancellation and late replies."""

from __future__ import annotations

import asyncio

import pytest

from tests.live.helpers import Counter, run
from trawl.live import Actor, AskTimeout, Conversation, Node, NoSuchActor, RemoteError, action


class Sleeper(Actor):
    @action()
    async def nap(self, seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds


class Haggler(Actor):
    """Three steps: an offer, a counter-offer, the deal."""

    @action()
    async def haggle(self, offer: int, conv: Conversation) -> None:
        await conv.reply({"counter": offer * 2})
        accepted = await conv.receive(timeout=2, schema=int)
        await conv.reply({"deal": accepted})


def test_a_reply_reaches_the_ask_waiting_for_it_by_id() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            sleeper = node.spawn(Sleeper())
            counter = node.spawn(Counter())
            # Answers come back out of order: each reaches its own ask.
            answers = await asyncio.gather(
                *(node.ask(s, "nap", d) for s, d in [(sleeper, 0.3)]),
                *(node.ask(counter, "add", {"n": n}) for n in (1, 2, 3)),
            )
            assert answers == [0.3, 1, 3, 6]

    run(main)


def test_a_late_reply_is_dropped_and_counted_never_delivered_to_another_waiter() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            sleeper = node.spawn(Sleeper())
            with pytest.raises(AskTimeout, match=r"within 0\.1s"):
                await node.ask(sleeper, "nap", 0.3, timeout=0.1)
            # The next ask waits while the late answer (0.3) arrives; it must get its own.
            assert await node.ask(sleeper, "nap", 0.05) == 0.05
            assert node.stats["late_replies"] == 1

    run(main)


def test_a_cancelled_ask_forgets_its_waiter() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            sleeper = node.spawn(Sleeper())
            ask = asyncio.create_task(node.ask(sleeper, "nap", 0.2))
            await asyncio.sleep(0.05)
            ask.cancel()
            with pytest.raises(asyncio.CancelledError):
                await ask
            assert [me for me, _ in node._waiters if "~ask" in me] == []
            await asyncio.sleep(0.3)
            assert node.stats["late_replies"] == 1

    run(main)


def test_a_multi_step_conversation_keeps_its_own_thread() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            haggler = node.spawn(Haggler())
            async with node.converse(haggler) as conv:
                await conv.send("haggle", 10)
                assert await conv.receive() == {"counter": 20}
                await conv.send("ignored-action-name", 15)
                assert await conv.receive() == {"deal": 15}
            async with node.converse(haggler) as conv:
                await conv.send("haggle", 1)
                assert await conv.receive() == {"counter": 2}
                with pytest.raises(RemoteError, match="AskTimeout"):
                    await conv.receive(timeout=3)  # we never accept: the haggler gives up

    run(main)


def test_asking_nobody_or_a_failing_handler_fails_at_once() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            with pytest.raises(RemoteError, match="NoSuchActor"):
                await node.ask("n1:ghost", "x", timeout=5)
            counter = node.spawn(Counter())
            ended = node.watch(counter)
            with pytest.raises(RemoteError, match="RuntimeError: nope"):
                await node.ask(counter, "fail", "nope", timeout=5)
            assert (await ended).outcome == "crashed"
            with pytest.raises(NoSuchActor):
                await node.send(counter, "add", {"n": 1})  # it crashed: nothing lives there now

    run(main)


def test_asks_queued_behind_a_stopping_actor_are_told_it_stopped() -> None:
    async def main() -> None:
        async with Node("n1") as node:
            sleeper = node.spawn(Sleeper())
            first = asyncio.create_task(node.ask(sleeper, "nap", 0.3))
            queued = asyncio.create_task(node.ask(sleeper, "nap", 0.1))
            await asyncio.sleep(0.1)
            await node.stop_actor(sleeper)
            for ask in (first, queued):
                with pytest.raises(RemoteError):
                    await ask
            assert "ActorStopped" in str(queued.exception())

    run(main)
