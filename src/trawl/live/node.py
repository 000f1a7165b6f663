"""A node: one process's actors, how messages reach them, and its place in the cluster.

Local messages go straight into a mailbox. Messages to another node's actors go through the
transport (RabbitMQ for a cluster, nothing at all by default). Nodes ping each other; one
not heard from for ``dead_after`` seconds is dropped: its services leave the registry, asks
waiting on its actors fail with :class:`NodeLost`, and every local monitor of its actors gets
its one ``crashed`` sentinel. A node heard from after being dropped is told it was expelled
and its messages are ignored (counted), so no monitor ever hears twice about one actor.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import secrets
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from trawl.live import address as addresses
from trawl.live.actor import Actor
from trawl.live.cell import Cell
from trawl.live.conversation import DEFAULT_TIMEOUT, Conversation
from trawl.live.errors import BadAddress, NodeLost, NoSuchActor
from trawl.live.frames import (
    Bye,
    Control,
    Envelope,
    Expelled,
    Monitor,
    Outcome,
    Ping,
    Registered,
    Sentinel,
    Snapshot,
    decode,
    encode,
)
from trawl.live.kv import MemoryMap, SharedMap
from trawl.live.registry import Registry, Where
from trawl.live.transport import Loopback, Transport

log = logging.getLogger(__name__)

Pseudo = Callable[[Envelope], Awaitable[None]]


def default_name() -> str:
    """Host, pid and a random suffix: a restarted process is a new node."""
    host = socket.gethostname().split(".")[0] or "node"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


class Node:
    def __init__(
        self,
        name: str | None = None,
        *,
        transport: Transport | None = None,
        kv: SharedMap | None = None,
        mailbox_size: int = 1000,
        ping_interval: float = 1.0,
        dead_after: float = 5.0,
    ) -> None:
        if mailbox_size < 1:
            raise ValueError(f"mailbox_size={mailbox_size}: at least 1")
        if not 0 < ping_interval < dead_after:
            raise ValueError("ping_interval must be > 0 and shorter than dead_after")
        self.id = addresses.check_name(name or default_name(), "node")
        self.transport = transport or Loopback()
        self.kv: SharedMap = kv or MemoryMap()
        self.mailbox_size = mailbox_size
        self.ping_interval, self.dead_after = ping_interval, dead_after
        self.registry = Registry(self.id)
        self.stats: Counter[str] = Counter()
        self.members: dict[str, float] = {}
        self.dead: set[str] = set()
        self._cells: dict[str, Cell] = {}
        self._waiters: dict[tuple[str, str], Conversation] = {}
        self._pseudo: dict[str, Pseudo] = {}
        self._watching: dict[str, set[str]] = {}
        self._ids = itertools.count(1)
        self._pinger: asyncio.Task[None] | None = None
        self._running = False
        self.expelled = asyncio.Event()

    # -- life -----------------------------------------------------------------------------

    async def start(self) -> Node:
        await self.transport.start(self.id, self._on_message, self._on_control)
        self._running = True
        if self.transport.clustered:
            await self.transport.broadcast(encode(Ping(self.id)))
            self._pinger = asyncio.create_task(self._ping_loop(), name=f"pings of {self.id}")
        return self

    async def stop(self) -> None:
        """Stop every actor (``cancelled``; their sentinels are sent), then leave."""
        if not self._running:
            return
        self._running = False
        cells = list(self._cells.values())
        for cell in cells:
            cell.task.cancel()
        await asyncio.gather(*(c.wait() for c in cells), return_exceptions=True)
        if self._pinger is not None:
            self._pinger.cancel()
            await asyncio.gather(self._pinger, return_exceptions=True)
        if self.transport.clustered and not self.expelled.is_set():
            try:
                await self.transport.broadcast(encode(Bye(self.id)))
            except Exception as error:  # the broker may be what failed
                log.warning("could not say goodbye to the cluster: %s", error)
        await self.transport.close()

    async def __aenter__(self) -> Node:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- actors ---------------------------------------------------------------------------

    def spawn(self, behaviour: Actor, name: str | None = None) -> str:
        """Start *behaviour* as an actor on this node; returns its address at once (its
        ``on_start`` runs in its own task, messages wait in its mailbox meanwhile)."""
        if not isinstance(behaviour, Actor):
            raise TypeError(f"spawn takes an Actor instance, not {type(behaviour).__name__}")
        if name is None:
            name = f"{type(behaviour).__name__.lower()}-{next(self._ids)}"
        addresses.check_name(name, "actor")
        if name.startswith("~"):
            raise BadAddress(f"actor name {name!r}: names starting with ~ are the node's")
        if name in self._cells:
            raise ValueError(f"an actor named {name!r} already runs on node {self.id}")
        cell = Cell(self, name, behaviour, self.mailbox_size)
        self._cells[name] = cell
        return cell.address

    def actors(self) -> list[str]:
        return [c.address for c in self._cells.values()]

    async def stop_actor(self, address: str) -> None:
        """Stop the actor at *address* (``done``); returns when it has stopped."""
        node, name = addresses.split(address)
        if node != self.id:
            raise NoSuchActor(f"{address}: only this node's actors can be stopped from here")
        cell = self._cells.get(name)
        if cell is None:
            raise NoSuchActor(f"no actor at {address}")
        if cell.task is asyncio.current_task():
            cell.stop_requested = True
            return
        cell.stop()
        await cell.wait()

    async def _ended(self, cell: Cell, sentinel: Sentinel) -> None:
        self._cells.pop(cell.name, None)
        self.stats[f"actors_{sentinel.outcome}"] += 1
        for service in self.registry.services_of(cell.address):
            await self.unregister(service, cell.address)
        for watcher in sorted(cell.monitors):
            try:
                await self._post(
                    Envelope(to=watcher, action="sentinel", body=sentinel, sender=cell.address)
                )
            except Exception as error:  # one watcher out of reach must not cost the others
                log.warning("sentinel of %s to %s: %s", cell.address, watcher, error)
        await cell.behaviour._after_stop(sentinel)

    # -- messages -------------------------------------------------------------------------

    async def send(
        self, to: str, action: str, body: Any = None, *, sender: str | None = None
    ) -> None:
        """Put a message in *to*'s mailbox (waiting while it is full). Raises
        :class:`NoSuchActor` for a local address with no actor, :class:`NodeLost` for a
        node not in the cluster."""
        node, name = addresses.split(to)
        if node == self.id and name not in self._cells and to not in self._pseudo:
            self.stats["undeliverable"] += 1
            raise NoSuchActor(f"no actor at {to}")
        await self._post(Envelope(to=to, action=action, body=body, sender=sender))

    async def ask(
        self,
        to: str,
        action: str,
        body: Any = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        schema: Any = None,
        sender: str | None = None,
    ) -> Any:
        """Send *body* to *to*'s *action* and wait at most *timeout* seconds for the answer
        (checked against *schema* if given). Raises :class:`AskTimeout`,
        :class:`RemoteError` (the handler raised, or the message did not match its schema),
        :class:`NoSuchActor` or :class:`NodeLost`. Cancelling the ask forgets it: a late
        answer is dropped and counted."""
        async with self.converse(to, sender=sender) as conv:
            await conv.send(action, body)
            return await conv.receive(timeout, schema)

    def converse(self, to: str, *, sender: str | None = None) -> Conversation:
        addresses.split(to)
        me = sender or f"{self.id}:~ask-{next(self._ids)}"
        return Conversation(self, me, to, f"{self.id}/{next(self._ids)}")

    def monitor(self, target: str, watcher: str) -> None:
        """*watcher* gets exactly one sentinel when *target* stops (``missing`` at once if
        nothing lives there; ``crashed`` with NodeLost if its node is gone)."""
        node, name = addresses.split(target)
        if node == self.id:
            cell = self._cells.get(name)
            if cell is None or cell.ended:
                self._later(
                    Envelope(
                        to=watcher,
                        action="sentinel",
                        body=Sentinel(target, "missing"),
                        sender=target,
                    )
                )
            else:
                cell.monitors.add(watcher)
            return
        if node not in self.members:
            lost = Sentinel(target, "crashed", f"NodeLost: node {node} is not in the cluster")
            self._later(Envelope(to=watcher, action="sentinel", body=lost, sender=target))
            return
        self._watching.setdefault(target, set()).add(watcher)
        self._later_control(node, Monitor(target, watcher))

    def watch(self, target: str) -> asyncio.Future[Sentinel]:
        """A future resolved with *target*'s sentinel, for code outside any actor."""
        future: asyncio.Future[Sentinel] = asyncio.get_running_loop().create_future()
        me = f"{self.id}:~watch-{next(self._ids)}"

        async def resolve(envelope: Envelope) -> None:
            self._pseudo.pop(me, None)
            if not future.done():
                future.set_result(Sentinel(**_fields(envelope.body)))

        self._pseudo[me] = resolve
        self.monitor(target, me)
        return future

    def attach(self, name: str, deliver: Pseudo) -> str:
        """An address whose messages go to *deliver* instead of a mailbox (a session's
        WebSocket client). Names start with ``~``."""
        address = f"{self.id}:{addresses.check_name(name, 'pseudo actor')}"
        if not name.startswith("~"):
            raise BadAddress(f"{name!r}: attached names start with ~")
        self._pseudo[address] = deliver
        return address

    def detach(self, address: str) -> None:
        self._pseudo.pop(address, None)

    def is_client(self, address: str | None) -> bool:
        return address is not None and ":~client-" in address

    async def _post(self, envelope: Envelope) -> None:
        node, name = addresses.split(envelope.to)
        if node != self.id:
            if node not in self.members:
                self.stats["undeliverable"] += 1
                if envelope.reply or envelope.action == "sentinel":
                    return  # to a node gone: nobody is left to tell
                raise NodeLost(f"node {node} is not in the cluster (sending to {envelope.to})")
            self.stats["sent_remote"] += 1
            await self.transport.send(node, encode(envelope), control=False)
            return
        if envelope.conv is not None:
            waiter = self._waiters.get((envelope.to, envelope.conv))
            if waiter is not None:
                if not waiter.offer(envelope):
                    self.stats["misrouted"] += 1
                return
        pseudo = self._pseudo.get(envelope.to)
        if pseudo is not None:
            await pseudo(envelope)
            return
        if envelope.reply:
            self.stats["late_replies"] += 1
            return
        cell = self._cells.get(name)
        if cell is None or cell.ended:
            self.stats["undeliverable"] += 1
            if envelope.conv and envelope.sender and not envelope.reply:
                error = f"NoSuchActor: no actor at {envelope.to}"
                await self._post(
                    Envelope(
                        to=envelope.sender,
                        sender=envelope.to,
                        conv=envelope.conv,
                        reply=True,
                        error=error,
                    )
                )
            return
        self.stats["delivered"] += 1
        await cell.put(envelope)

    def _later(self, envelope: Envelope) -> None:
        task = asyncio.get_running_loop().create_task(self._post(envelope))
        task.add_done_callback(_log_failure)

    def _later_control(self, node: str, frame: Control) -> None:
        task = asyncio.get_running_loop().create_task(
            self.transport.send(node, encode(frame), control=True)
        )
        task.add_done_callback(_log_failure)

    # -- services -------------------------------------------------------------------------

    async def register(self, service: str, address: str) -> None:
        addresses.check_name(service, "service")
        node, name = addresses.split(address)
        if node != self.id or name not in self._cells:
            raise NoSuchActor(f"{address} is not an actor on this node")
        if self.registry.add_local(service, address) and self.transport.clustered:
            await self.transport.broadcast(encode(Registered(self.id, service, address, True)))

    async def unregister(self, service: str, address: str) -> None:
        if (
            self.registry.remove_local(service, address)
            and self.transport.clustered
            and self._running
        ):
            try:
                await self.transport.broadcast(encode(Registered(self.id, service, address, False)))
            except Exception as error:
                log.warning("could not announce that %s left %s: %s", address, service, error)

    def lookup(self, service: str, where: Where = "mixed") -> str | None:
        """An address offering *service* (``mixed`` prefers this node's), or None."""
        return self.registry.lookup(service, where)

    def lookup_all(self, service: str, where: Where = "mixed") -> list[str]:
        return self.registry.all(service, where)

    # -- the cluster ----------------------------------------------------------------------

    async def _on_message(self, data: bytes) -> None:
        frame = decode(data)
        if not isinstance(frame, Envelope):
            self.stats["bad_frames"] += 1
            return
        sender_node = frame.sender.partition(":")[0] if frame.sender else None
        if sender_node in self.dead:
            self.stats["from_dead_nodes"] += 1
            return
        if sender_node is not None and sender_node != self.id:
            await self._heard(sender_node)  # a message is news of life, and may need a reply
        if frame.action == "sentinel" and not frame.conv and sender_node != self.id:
            watchers = self._watching.get(frame.sender or "", set())
            if frame.to not in watchers:
                self.stats["duplicate_sentinels"] += 1
                return
            watchers.discard(frame.to)
            if not watchers:
                self._watching.pop(frame.sender or "", None)
        try:
            await self._post(frame)
        except Exception as error:
            log.warning("could not deliver a message from %s: %s", frame.sender, error)

    async def _on_control(self, data: bytes) -> None:
        frame = decode(data)
        match frame:
            case Ping(node=node) if node != self.id:
                if node in self.dead:
                    self.stats["from_dead_nodes"] += 1
                    await self.transport.send(node, encode(Expelled(node)), control=True)
                    return
                await self._heard(node)
            case Bye(node=node) if node != self.id and node in self.members:
                await self._drop(node, "left")
            case Expelled(node=node) if node == self.id and not self.expelled.is_set():
                log.error("node %s was dropped from the cluster as silent; stopping", self.id)
                self.expelled.set()
                asyncio.get_running_loop().create_task(self.stop())
            case Monitor(target=target, watcher=watcher):
                self.monitor(target, watcher)
            case Registered(node=node) if node not in self.dead and node != self.id:
                self.registry.set_remote(node, frame.service, frame.address, frame.added)
            case Snapshot(node=node) if node not in self.dead and node != self.id:
                self.registry.replace_remote(node, frame.services)
            case _:
                pass

    async def _heard(self, node: str) -> None:
        new = node not in self.members
        self.members[node] = time.monotonic()
        if new:
            log.info("node %s joined", node)
            snapshot = Snapshot(self.id, self.registry.snapshot())
            await self.transport.send(node, encode(snapshot), control=True)

    async def _ping_loop(self) -> None:
        while True:
            await asyncio.sleep(self.ping_interval)
            try:
                await self.transport.broadcast(encode(Ping(self.id)))
            except Exception as error:
                log.warning("ping failed: %s", error)
            now = time.monotonic()
            for node, seen in list(self.members.items()):
                if now - seen > self.dead_after:
                    await self._drop(node, f"silent for {now - seen:.1f}s")

    async def _drop(self, node: str, why: str) -> None:
        self.members.pop(node, None)
        self.dead.add(node)
        self.registry.drop_node(node)
        self.stats["nodes_dropped"] += 1
        log.warning("node %s dropped: %s", node, why)
        outcome: Outcome = "cancelled" if why == "left" else "crashed"
        error = None if why == "left" else f"NodeLost: node {node} {why}"
        for target in [t for t in self._watching if t.startswith(f"{node}:")]:
            for watcher in sorted(self._watching.pop(target)):
                sentinel = Sentinel(target, outcome, error)
                await self._post(
                    Envelope(to=watcher, action="sentinel", body=sentinel, sender=target)
                )
        for waiter in [w for w in self._waiters.values() if w.peer.startswith(f"{node}:")]:
            waiter.offer(
                Envelope(
                    to=waiter.me,
                    sender=waiter.peer,
                    conv=waiter.id,
                    reply=True,
                    error=f"NodeLost: node {node} {why}",
                )
            )


def _fields(body: Any) -> dict[str, Any]:
    if isinstance(body, Sentinel):
        return {"actor": body.actor, "outcome": body.outcome, "error": body.error}
    return dict(body)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("a delayed delivery failed: %s", task.exception())
