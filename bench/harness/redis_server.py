"""The Redis server Celery's rows use: ``BENCH_REDIS``, else 127.0.0.1:6379, else a
throwaway ``redis-server`` (no persistence) started on a free port and stopped at exit."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time
from urllib.parse import urlsplit

LOCAL = "redis://127.0.0.1:6379/15"  # database 15: the benchmark empties its queue keys only

_started: list[subprocess.Popen[bytes]] = []


def url() -> str:
    """A Redis URL that answers PING; raises RuntimeError saying what is missing."""
    explicit = os.environ.get("BENCH_REDIS")
    if explicit:
        if not _pings(explicit):
            raise RuntimeError(f"BENCH_REDIS={explicit} does not answer PING")
        return explicit
    if _pings(LOCAL):
        return LOCAL
    return _throwaway()


def _pings(address: str) -> bool:
    parts = urlsplit(address)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _throwaway() -> str:
    if _started:
        return f"redis://127.0.0.1:{_port_of(_started[0])}/15"
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(
            "no Redis on 127.0.0.1:6379 and no redis-server to start one "
            "(apt-get install redis-server, or set BENCH_REDIS)"
        )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    _started.append(server)
    atexit.register(_stop)
    address = f"redis://127.0.0.1:{port}/15"
    deadline = time.monotonic() + 10
    while not _pings(address):
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not start")
        time.sleep(0.05)
    return address


def _port_of(server: subprocess.Popen[bytes]) -> str:
    args = list(server.args)  # type: ignore[arg-type]
    return str(args[args.index("--port") + 1])


def _stop() -> None:
    for server in _started:
        server.terminate()
        server.wait(10)
    _started.clear()
