"""A PostgreSQL server for tests: TRAWL_TEST_PG, else 127.0.0.1:5432, else a throwaway cluster.

The throwaway cluster (initdb + pg_ctl on a free port, in a temp dir) lets the suite run on
a laptop with no server installed as a service; it is stopped when the session ends.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"


def reachable(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not candidates:
        raise RuntimeError(f"{name} not found: install PostgreSQL or set TRAWL_TEST_PG")
    return candidates[-1]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (right now), below the kernel's
    ephemeral range: a port from that range can be taken, while its server is down (a test
    restarting it), as the source port of an outgoing connection - a client retrying the
    same port can even connect to itself - and the server cannot listen there again."""
    low = _ephemeral_low()
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10_000, low) if low > 10_000 else 0
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise RuntimeError(f"no free port found between 10000 and {low}")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default; elsewhere, ports above 10000 are mostly quiet


def _as_user() -> list[str]:
    # initdb refuses to run as root; run the throwaway cluster as the postgres user then.
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError as error:
        raise RuntimeError("running as root and there is no postgres user for initdb") from error
    return ["runuser", "-u", "postgres", "--"]


class Cluster:
    """A private cluster in a temp dir that a test can stop and start again: same data
    directory, same port, so URLs stay valid across an outage."""

    def __init__(self) -> None:
        self._prefix = _as_user()
        self.root = Path(tempfile.mkdtemp(prefix="trawl-pg-"))
        if self._prefix:
            shutil.chown(self.root, "postgres", "postgres")
        self.data, self.port = self.root / "data", free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        try:
            self._pg(
                _bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"
            )
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg(
            _bin("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )
        deadline = time.monotonic() + timeout
        while not reachable(self.url):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster on port {self.port} did not come up")
            time.sleep(0.05)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: disconnect clients, clean shutdown)."""
        self._pg(_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        subprocess.run(
            [*self._prefix, _bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(self.root, ignore_errors=True)

    def _pg(self, *argv: str) -> None:
        subprocess.run([*self._prefix, *argv], check=True, capture_output=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[str]:
    """Start a private cluster; yields a URL to its ``postgres`` database."""
    with Cluster() as cluster:
        cluster.start()
        yield cluster.url


@contextlib.contextmanager
def server() -> Iterator[str]:
    """A URL to a maintenance database on a server the tests may create databases on."""
    configured = os.environ.get("TRAWL_TEST_PG")
    if configured:
        yield configured
        return
    if reachable(DEFAULT):
        yield DEFAULT
        return
    with throwaway_cluster() as url:
        yield url


def with_database(url: str, name: str) -> str:
    """*url* pointing at database *name* instead."""
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


def create_database(
    admin_url: str, name: str, template: str | None = None, *, options: str = ""
) -> str:
    """A new database *name* (dropped first if it exists); *options* go after the
    template in CREATE DATABASE (a locale, say)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        suffix = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{name}"{suffix} {options}')
    return with_database(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
