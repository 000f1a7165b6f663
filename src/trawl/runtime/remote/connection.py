"""A pipeline's WebSocket to its tracker: requests matched to replies by ``seq``,
advisories handed to a callback, pings every ``ping_every`` seconds, and reconnection with
backoff when the socket drops (docs/protocol.md).

While the socket is down a request fails at once with :class:`TrackerUnavailable`, which
the worker waits out as it waits out a database outage: the tasks it runs go on, and what
they finish is committed once the connection is back. A token the tracker refuses, or a
protocol it does not speak, is :class:`PipelineRefused`: no retry will help.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from trawl.model import wire
from trawl.model.errors import DatabaseUnavailable, TrawlError

log = logging.getLogger("trawl.remote")
T = TypeVar("T")

REQUEST_TIMEOUT = 60.0
RECONNECT_MAX = 30.0
_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()

Advise = Callable[[str, Any], None]


class TrackerUnavailable(DatabaseUnavailable):
    """The tracker cannot be reached now (the worker retries, as for a database outage)."""


class PipelineRefused(TrawlError):
    """The tracker will not take this pipeline: a wrong or revoked token, or a protocol it
    does not speak."""


class RequestRefused(TrawlError):
    """The tracker answered a request with an error (``kind``; ``field`` names the part of
    the request it was about)."""

    def __init__(self, kind: str, message: str, field: str | None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.field = kind, field


class Connection:
    def __init__(
        self,
        url: str,
        *,
        pipeline: str,
        token: str,
        hello: wire.Hello | None = None,
        on_advisory: Advise,
        in_use: Callable[[], int] = lambda: 0,
        disk: Callable[[], tuple[int | None, int | None]] = lambda: (None, None),
    ) -> None:
        self.url = url.rstrip("/") + wire.PATH  # ws://host:port -> ws://host:port/ws/pipeline
        self.pipeline, self._token, self.hello = pipeline, token, hello
        self._advise, self._in_use, self._disk = on_advisory, in_use, disk
        self.welcome: wire.Welcome | None = None
        self.offset = 0.0  # the tracker's clock minus ours, from its welcome
        self.round_trip = 0.0  # the quickest request to the tracker and back, once measured
        self.refused: PipelineRefused | None = None
        self._ws: ClientConnection | None = None
        self._seq = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._up = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self, timeout: float = 30.0) -> wire.Welcome:
        """Connect and say hello; keeps the connection up until :meth:`close`."""
        if self.hello is None:
            raise ValueError("a connection needs its hello before it starts")
        first: asyncio.Future[wire.Welcome] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._keep_up(first), name="trawl-remote")
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(first)
        except TimeoutError:
            await self.close()
            raise TrackerUnavailable(f"no welcome from {self.url} within {timeout:g}s") from None
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self._closing = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def request(
        self, kind: str, body: Any, reply: type[T], timeout: float = REQUEST_TIMEOUT
    ) -> T:
        """Send a request and wait for its reply, decoded as *reply*."""
        return msgspec.convert(await self.request_raw(kind, body, timeout), reply)

    async def request_raw(self, kind: str, body: Any, timeout: float = REQUEST_TIMEOUT) -> Any:
        """Send a request and wait for its reply's payload, as JSON gave it."""
        if self.refused is not None:
            raise self.refused
        ws = self._ws
        if ws is None or not self._up.is_set():
            raise TrackerUnavailable(f"not connected to {self.url} (reconnecting)")
        self._seq += 1
        seq = self._seq
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[seq] = waiter
        frame = {"type": kind, "seq": seq, "request": msgspec.to_builtins(body)}
        try:
            await ws.send(_encode.encode(frame).decode())
            async with asyncio.timeout(timeout):
                payload = await waiter
        except (ConnectionClosed, OSError) as error:
            raise TrackerUnavailable(f"connection to {self.url} lost: {error}") from None
        except TimeoutError:
            raise TrackerUnavailable(f"no reply to {kind} within {timeout:g}s") from None
        finally:
            self._waiting.pop(seq, None)
        return payload

    # -- the connection's life -----------------------------------------------------------------

    async def _keep_up(self, first: asyncio.Future[wire.Welcome]) -> None:
        delay = 0.5
        while not self._closing:
            try:
                await self._session(first)
                delay = 0.5  # it was up: start the backoff again
            except PipelineRefused as refused:
                self.refused = refused
                log.error("%s", refused)
                if not first.done():
                    first.set_exception(refused)
                self._advise("refused", str(refused))
                return
            except (OSError, WebSocketException, TrackerUnavailable, TimeoutError) as error:
                log.warning(
                    "tracker %s unreachable (%s); reconnecting in %.1fs", self.url, error, delay
                )
            finally:
                self._down()
            await asyncio.sleep(delay)  # close() cancels this task: no wait at the end
            delay = min(RECONNECT_MAX, delay * 2)

    async def _session(self, first: asyncio.Future[wire.Welcome]) -> None:
        headers = {"Authorization": f"Bearer {self._token}", "X-Trawl-Pipeline": self.pipeline}
        try:
            ws = await connect(
                self.url, additional_headers=headers, max_size=16 << 20, open_timeout=10
            )
        except InvalidStatus as error:
            status = error.response.status_code
            if status in (401, 403):
                raise PipelineRefused(
                    f"the tracker at {self.url} refused pipeline {self.pipeline!r}: its id or "
                    f"token is wrong, or the token was rotated (HTTP {status})"
                ) from None
            raise TrackerUnavailable(f"the tracker answered HTTP {status}") from None
        self._ws = ws
        try:
            await ws.send(_encode.encode(self.hello).decode())  # set before start()
            welcome = await self._welcome(ws)
            self.welcome, self.offset = welcome, welcome.time - time.time()
            self._up.set()
            reader = asyncio.create_task(self._read(ws))
            pinger: asyncio.Task[None] | None = None
            try:
                await self._measure_clock()
                if not first.done():
                    first.set_result(welcome)
                else:
                    log.info("reconnected to %s", self.url)
                    self._advise("welcome", welcome)
                pinger = asyncio.create_task(self._ping_loop(welcome.ping_every))
                await reader
            finally:
                for task in (reader, pinger):
                    if task is not None:
                        task.cancel()
                await asyncio.gather(*(t for t in (reader, pinger) if t), return_exceptions=True)
        finally:
            await ws.close()

    async def _welcome(self, ws: ClientConnection) -> wire.Welcome:
        try:
            async with asyncio.timeout(30):
                text = await ws.recv()
        except ConnectionClosed as closed:
            raise self._closed(closed) from None
        frame = _decode.decode(text)
        if not isinstance(frame, dict) or frame.get("type") != "welcome":
            raise TrackerUnavailable(f"expected a welcome, got {str(text)[:200]}")
        return msgspec.convert(frame.get("payload"), wire.Welcome)

    def _closed(self, closed: ConnectionClosed) -> Exception:
        code = closed.rcvd.code if closed.rcvd is not None else None
        reason = closed.rcvd.reason if closed.rcvd is not None else ""
        if code in (4400, 4426):
            return PipelineRefused(f"the tracker at {self.url} refused the hello: {reason}")
        return TrackerUnavailable(f"the tracker closed the connection ({code}: {reason})")

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for text in ws:
                self._frame(_decode.decode(text))
        except ConnectionClosed as closed:
            raise self._closed(closed) from None
        raise TrackerUnavailable("the tracker closed the connection")

    def _frame(self, frame: Any) -> None:
        if not isinstance(frame, dict):
            log.warning("tracker sent a frame that is not an object: %.200r", frame)
            return
        seq = frame.get("seq")
        if "status" in frame:
            waiter = self._waiting.get(seq) if isinstance(seq, int) else None
            if waiter is None or waiter.done():
                if frame["status"] == "error":
                    log.warning("tracker: %s", frame.get("payload"))
                return
            if frame["status"] == "ok":
                waiter.set_result(frame.get("payload"))
            else:
                problem = frame.get("payload") or {}
                waiter.set_exception(_refusal(problem))
        elif seq is None:
            self._advise(str(frame.get("type")), frame.get("payload"))

    def _down(self) -> None:
        self._up.clear()
        self._ws = None
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(TrackerUnavailable(f"connection to {self.url} lost"))

    async def _measure_clock(self, samples: int = 16) -> None:
        """The tracker's clock minus ours, from the quickest of a few round trips (its time
        is taken half-way, so the error is at most half that round trip). Permits' start
        times are the tracker's: an error here would shift this pipeline's requests."""
        best: tuple[float, float] | None = None
        for _ in range(samples):
            sent = time.time()
            reply = await self.request("clock", wire.ClockRequest(), wire.PingReply, timeout=10)
            back = time.time()
            if best is None or back - sent < best[0]:
                best = (back - sent, reply.time - (sent + back) / 2)
        if best is not None:
            self.round_trip, self.offset = best
            log.info(
                "tracker clock: %+.1f ms from ours (round trip %.1f ms)",
                self.offset * 1000,
                best[0] * 1000,
            )
            if abs(self.offset) > 1.0:
                log.warning(
                    "this machine's clock is %.3fs %s the tracker's: leases and permits "
                    "use the tracker's time",
                    abs(self.offset),
                    "behind" if self.offset > 0 else "ahead of",
                )

    async def _ping_loop(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            free, total = self._disk()
            ping = wire.PingRequest(in_use=self._in_use(), disk_free=free, disk_total=total)
            try:
                await self.request("ping", ping, wire.PingReply, timeout=every)
            except TrackerUnavailable as error:
                log.warning("ping failed: %s", error)


def _refusal(problem: dict[str, Any]) -> Exception:
    kind = str(problem.get("type", "Error"))
    message = str(problem.get("message", ""))
    if kind == "Unavailable":
        return TrackerUnavailable(message)
    return RequestRefused(kind, message, problem.get("field"))
