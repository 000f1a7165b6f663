"""The PostgreSQL server the benchmarks use: ``BENCH_PG``, else 127.0.0.1:5432, else a
throwaway cluster started here and removed at exit. Each benchmark gets its own database."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import sqlalchemy as sa

LOCAL = "postgresql://postgres@127.0.0.1:5432/postgres"


class Server:
    """A reachable PostgreSQL server, addressed by the URL of its maintenance database."""

    def __init__(self, url: str, cluster: Cluster | None = None) -> None:
        self.url = url
        self.cluster = cluster

    def database_url(self, name: str) -> str:
        return sa.make_url(self.url).set(database=name).render_as_string(hide_password=False)

    def dsn(self, name: str | None = None) -> str:
        url = sa.make_url(self.database_url(name) if name else self.url)
        return url.set(drivername="postgresql").render_as_string(hide_password=False)

    def admin(self, sql: str) -> None:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql)

    def checkpoint(self) -> bool:
        """Write out every dirty page now, so a run's WAL does not set off a checkpoint in
        the next run; False (nothing done) for a user without the right to ask one."""
        try:
            self.admin("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            return False
        return True

    def settings(self) -> dict[str, str]:
        names = (
            "server_version",
            "fsync",
            "synchronous_commit",
            "full_page_writes",
            "shared_buffers",
            "max_wal_size",
            "wal_level",
        )
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]

    def create(self, prefix: str, template: str | None = None) -> str:
        """A new empty database (or a copy of *template*); returns its name."""
        name = f"bench_{prefix}_{secrets.token_hex(3)}"
        self.admin(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return name

    def drop(self, name: str) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    @contextlib.contextmanager
    def database(self, prefix: str, template: str | None = None) -> Iterator[str]:
        """A fresh database for one benchmark, dropped afterwards; yields its URL."""
        name = self.create(prefix, template)
        try:
            yield self.database_url(name)
        finally:
            self.drop(name)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


def connect() -> Server:
    """The server to benchmark on, starting a throwaway cluster when none is reachable."""
    url = os.environ.get("BENCH_PG")
    if url:
        return Server(url)
    if _reachable(LOCAL):
        return Server(LOCAL)
    cluster = Cluster()
    cluster.start()
    return Server(cluster.url, cluster)


def _reachable(url: str) -> bool:
    try:
        dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


class Cluster:
    """initdb + pg_ctl in a temporary directory (as the postgres user when we are root)."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="trawl-bench-pg-"))
        self.data = self.root / "data"
        self.user = "postgres" if os.geteuid() == 0 else None
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        # Durability stays on (fsync, synchronous_commit: the defaults); only the socket moves.
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
        log = str(self.root / "log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-o", options, "-w", "start")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [str(Path(self.bindir) / program), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True)


def _bindir() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return str(Path(found[-1]).parent)
    initdb = shutil.which("initdb")
    if initdb is None:
        raise SystemExit("no PostgreSQL reachable and no initdb found: set BENCH_PG")
    return str(Path(initdb).parent)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
