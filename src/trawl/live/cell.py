"""A running actor: its mailbox, the task that empties it, its daemons and its monitors."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from trawl.live.actor import ActionSpec, Actor, DaemonSpec
from trawl.live.context import Context
from trawl.live.conversation import Conversation, check
from trawl.live.errors import ActorStopped, SchemaError
from trawl.live.frames import Envelope, Outcome, Sentinel

if TYPE_CHECKING:
    from trawl.live.node import Node

log = logging.getLogger(__name__)

STOP_HOOK_SECONDS = 5.0  # on_stop gets this long before the actor is gone regardless
MAX_CONCURRENT = 64  # concurrent actions running at once per actor; more wait their turn
FULL_WARNING_EVERY = 10.0


class Cell:
    def __init__(self, node: Node, name: str, behaviour: Actor, mailbox_size: int) -> None:
        self.node, self.name = node, name
        self.address = f"{node.id}:{name}"
        self.behaviour = behaviour
        self.mailbox: asyncio.Queue[Envelope] = asyncio.Queue(mailbox_size)
        self.monitors: set[str] = set()
        self.stop_requested = False
        self.ended = False
        self._cause: BaseException | None = None
        self._daemons: list[asyncio.Task[None]] = []
        self._concurrent: set[asyncio.Task[None]] = set()
        self._room = asyncio.Semaphore(MAX_CONCURRENT)
        self._full_warned = 0.0
        self._current: Envelope | None = None  # the message being handled
        self.ctx = Context(node, self)
        behaviour.ctx = self.ctx
        self.finished = asyncio.Event()
        self._began = False
        self.task = asyncio.create_task(self._main(), name=f"actor {self.address}")
        self.task.add_done_callback(self._never_began)

    def _never_began(self, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never runs its body, finally and all:
        # its end (and its monitors' sentinels) must still happen.
        if not self._began:
            outcome: Outcome = "done" if self.stop_requested else "cancelled"
            asyncio.get_running_loop().create_task(self._end(outcome, None))

    async def wait(self) -> None:
        await self.finished.wait()

    async def put(self, envelope: Envelope) -> None:
        """Into the mailbox; a full one makes the sender wait (and is reported)."""
        if self.mailbox.full():
            self.node.stats["mailbox_full"] += 1
            now = time.monotonic()
            if now - self._full_warned > FULL_WARNING_EVERY:
                self._full_warned = now
                log.warning(
                    "mailbox of %s is full (%d): senders wait", self.address, self.mailbox.maxsize
                )
        await self.mailbox.put(envelope)

    def stop(self) -> None:
        """Stop now (the message being handled is cut short); the outcome is ``done``."""
        self.stop_requested = True
        self.task.cancel()

    def die(self, cause: BaseException | None) -> None:
        """A dead-man's daemon ended: ``crashed`` with *cause*, or ``cancelled``."""
        self._cause = cause if cause is not None else asyncio.CancelledError()
        self.task.cancel()

    async def replace(self, behaviour: Actor) -> None:
        await self._stop_daemons()
        self.behaviour = behaviour
        behaviour.ctx = self.ctx
        await behaviour.on_start()
        self._start_daemons()

    async def _main(self) -> None:
        self._began = True
        outcome: Outcome = "done"
        error: str | None = None
        try:
            await self.behaviour.on_start()
            self._start_daemons()
            while not self.stop_requested:
                envelope = await self.mailbox.get()
                await self._handle(envelope)
        except asyncio.CancelledError:
            if isinstance(self._cause, Exception):
                outcome, error = "crashed", _describe(self._cause)
            elif self._cause is not None or not self.stop_requested:
                outcome = "cancelled"
        except Exception as crash:
            log.exception("actor %s crashed", self.address)
            outcome, error = "crashed", _describe(crash)
        finally:
            await asyncio.shield(self._end(outcome, error))

    async def _handle(self, envelope: Envelope) -> None:
        node, behaviour = self.node, self.behaviour
        if envelope.action == "sentinel" and not envelope.conv:
            await behaviour.on_sentinel(check(envelope.body, Sentinel, "sentinel"))
            return
        conv = (
            Conversation(node, self.address, envelope.sender, envelope.conv)
            if envelope.conv and envelope.sender
            else None
        )
        try:
            spec = behaviour._actions.get(envelope.action)
            if spec is None or (node.is_client(envelope.sender) and not spec.client):
                node.stats["unknown_action"] += 1
                message = f"{self.address} has no action {envelope.action!r}"
                if spec is not None:
                    message += " that a client may call"
                log.debug("%s", message)
                await self._refuse(conv, envelope, f"UnknownAction: {message}")
                return
            try:
                body = check(envelope.body, spec.schema(), f"action {spec.name!r}")
            except SchemaError as error:
                node.stats["schema_rejected"] += 1
                await self._refuse(conv, envelope, f"SchemaError: {error}")
                return
            method = getattr(behaviour, spec.method)
            if spec.concurrent:
                await self._room.acquire()  # back-pressure: the mailbox waits meanwhile
                task = asyncio.create_task(self._concurrently(method, spec, body, conv))
                self._concurrent.add(task)
                conv = None  # the task owns it now
                return
            self._current = envelope
            try:
                result = await (method(body, conv) if spec.wants_conversation else method(body))
            except Exception as error:
                self._current = None
                if conv is not None:  # even after a reply: a later step of it failed
                    await conv.fail(_describe(error))
                raise
            self._current = None
            if conv is not None and not conv.replied:
                await conv.reply(result)
        finally:
            if conv is not None:
                conv.close()

    async def _concurrently(
        self, method: Any, spec: ActionSpec, body: Any, conv: Conversation | None
    ) -> None:
        """A concurrent action: it answers as any action does; if it raises, the actor
        crashes as it would (after the asker is told)."""
        try:
            result = await (method(body, conv) if spec.wants_conversation else method(body))
            if conv is not None and not conv.replied:
                await conv.reply(result)
        except asyncio.CancelledError:
            if conv is not None and not conv.replied:
                await conv.fail(f"ActorStopped: {self.address} stopped before answering")
            raise
        except Exception as error:
            if conv is not None:
                await conv.fail(_describe(error))
            log.exception("action %s of %s failed", spec.name, self.address)
            self.die(error)
        finally:
            if conv is not None:
                conv.close()
            self._room.release()
            self._concurrent.discard(asyncio.current_task())

    async def _refuse(self, conv: Conversation | None, envelope: Envelope, error: str) -> None:
        if conv is not None:
            await conv.fail(error)
        elif self.node.is_client(envelope.sender) and envelope.sender:
            await self.node._post(
                Envelope(to=envelope.sender, sender=self.address, reply=True, error=error)
            )

    def _start_daemons(self) -> None:
        for spec in self.behaviour._daemons:
            task = asyncio.create_task(
                self._daemon(spec), name=f"daemon {spec.name} of {self.address}"
            )
            self._daemons.append(task)

    async def _stop_daemons(self) -> None:
        daemons, self._daemons = self._daemons, []
        current = asyncio.current_task()
        for task in daemons:
            if task is not current:
                task.cancel()
        await asyncio.gather(*(t for t in daemons if t is not current), return_exceptions=True)

    async def _daemon(self, spec: DaemonSpec) -> None:
        restarts: deque[float] = deque()
        delay = 0.1
        failure: BaseException | None = None
        while True:
            failure = None
            try:
                await getattr(self.behaviour, spec.method)()
            except Exception as error:
                failure = error
                log.exception("daemon %s of %s failed", spec.name, self.address)
            if spec.restart == "never" or (failure is None and spec.restart != "always"):
                break
            now = time.monotonic()
            while restarts and now - restarts[0] > spec.within:
                restarts.popleft()
            if len(restarts) >= spec.max_restarts:
                log.error(
                    "daemon %s of %s gave up after %d restarts",
                    spec.name,
                    self.address,
                    len(restarts),
                )
                break
            restarts.append(now)
            self.node.stats["daemon_restarts"] += 1
            await asyncio.sleep(delay)
            delay = min(5.0, delay * 2)
        if spec.dead_man:
            self.die(failure)

    async def _end(self, outcome: Outcome, error: str | None) -> None:
        self.ended = True
        await self._stop_daemons()
        running, current = list(self._concurrent), asyncio.current_task()
        for task in running:
            if task is not current:
                task.cancel()
        await asyncio.gather(*(t for t in running if t is not current), return_exceptions=True)
        try:
            async with asyncio.timeout(STOP_HOOK_SECONDS):
                await self.behaviour.on_stop()
        except Exception:
            log.exception("on_stop of %s failed", self.address)
        cut_short = [self._current] if self._current is not None else []
        while not self.mailbox.empty():
            cut_short.append(self.mailbox.get_nowait())
        for left in cut_short:
            if left.conv and left.sender and not left.reply:
                reason = f"ActorStopped: {self.address} stopped before answering"
                await self.node._post(
                    Envelope(
                        to=left.sender,
                        sender=self.address,
                        conv=left.conv,
                        reply=True,
                        error=reason,
                    )
                )
        try:
            await self.node._ended(self, Sentinel(self.address, outcome, error))
        finally:
            self.finished.set()


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


__all__ = ["ActorStopped", "Cell"]
