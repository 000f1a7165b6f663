"""When a request reached this machine, as the kernel saw it, for a server's request log.

A server that stamps a request with ``time.time()`` after reading it is late by however
long its process waited for the CPU (or, for a thread, for the GIL): two requests that
arrived 0.25 s apart can be logged 0.2 s apart. Linux stamps each packet as it is
received (``SO_TIMESTAMPING`` with software receive stamps), and ``recvmsg`` hands the
stamp over with the bytes. Where that is unavailable, the read's own time is used.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time

SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)  # Linux; Python names it in 3.13
RX_SOFTWARE, SOFTWARE = 1 << 3, 1 << 4  # SOF_TIMESTAMPING_RX_SOFTWARE, _SOFTWARE
CHUNK = 65536
ANCILLARY = socket.CMSG_SPACE(48)  # struct scm_timestamping: three timespecs


def enable(conn: socket.socket) -> bool:
    """Ask for the kernel's receive stamps on *conn*; False where it gives none."""
    conn.setblocking(False)
    try:
        conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, RX_SOFTWARE | SOFTWARE)
    except OSError:
        return False
    return True


async def receive(conn: socket.socket) -> tuple[bytes, float]:
    """The next bytes on *conn* (``b""`` at its end) and when the kernel received them."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            data, ancillary, _, _ = conn.recvmsg(CHUNK, ANCILLARY)
        except (BlockingIOError, InterruptedError):
            await _readable(loop, conn)
            continue
        return data, stamp_of(ancillary)


def stamp_of(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The software receive stamp among *ancillary* data, else now."""
    found = _kernel_stamp(ancillary)
    return time.time() if found is None else found


def _kernel_stamp(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= 16:
            seconds, nanoseconds = struct.unpack_from("qq", data)
            if seconds:
                return float(seconds) + float(nanoseconds) / 1e9
    return None


def warm_up(within: float = 1.0) -> bool:
    """Wait until the kernel stamps received packets; False if it did not *within* that
    long. Linux switches stamping on for the whole machine when a first socket asks, but
    later, from a work queue: a packet that arrives in between has no stamp, and its read
    time would be logged instead. Call it with a stamping socket already open (which keeps
    the switch on), before the stamps matter."""
    deadline = time.monotonic() + within
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        socket.create_connection(listener.getsockname()) as sender,
    ):
        conn, _ = listener.accept()
        with conn:
            try:
                conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, RX_SOFTWARE | SOFTWARE)
            except OSError:
                return False
            while time.monotonic() < deadline:
                sender.sendall(b".")
                _, ancillary, _, _ = conn.recvmsg(CHUNK, ANCILLARY)
                if _kernel_stamp(ancillary) is not None:
                    return True
                time.sleep(0.005)
    return False


async def _readable(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(conn.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(conn.fileno())
