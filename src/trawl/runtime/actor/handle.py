"""Actor processes as the orchestrator holds them: start, heartbeat, logs, stop, kill.

Each actor runs ``python -m trawl.runtime.actor.main`` in a session of its own (so a
Ctrl-C meant for the orchestrator is not delivered to it twice) with two pipes back: its
stderr, whose JSON log lines a thread relays through the orchestrator's logging, and a
heartbeat its event loop writes every half second. A heartbeat that stops means the loop
is blocked (a task stuck in code that never yields); a heartbeat pipe that breaks tells
the actor its orchestrator is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO

from trawl.runtime.actor.spec import ActorInfo, ActorType
from trawl.runtime.logs import relay

log = logging.getLogger("trawl.orchestrator")

EXIT_REPLACE = 3  # the actor shed a task stuck past its timeout: start another
EXIT_START_FAILED = 4  # the app or the actor's on_startup failed


@dataclass(frozen=True, kw_only=True, slots=True)
class Launch:
    """What every actor of one orchestrator is started with."""

    app_spec: str
    url: str
    grace: float
    log_level: str


@dataclass(kw_only=True, slots=True)
class ActorHandle:
    """One actor the orchestrator started and has not yet reaped."""

    info: ActorInfo
    type: ActorType
    popen: subprocess.Popen[bytes]
    beat_fd: int
    session: str  # the application_name of its database sessions (PGAPPNAME)
    started: float = field(default_factory=time.monotonic)
    last_beat: float | None = None  # monotonic time of the last heartbeat seen
    stopping: bool = False  # asked to stop (SIGTERM)
    killed: str | None = None  # why the orchestrator killed it, if it did

    @property
    def label(self) -> str:
        key = "" if self.info.key is None else f"[{self.info.key}]"
        return f"{self.info.type}{key}:{self.info.pid}"

    def beat(self) -> None:
        """Drain the heartbeat pipe; note when the last beat came."""
        try:
            while os.read(self.beat_fd, 4096):
                self.last_beat = time.monotonic()
        except (BlockingIOError, OSError):
            pass

    def silent_for(self, now: float) -> float:
        return now - (self.last_beat if self.last_beat is not None else self.started)

    def poll(self) -> int | None:
        return self.popen.poll()

    def terminate(self) -> None:
        """Ask for a graceful stop: finish within the grace period, release the rest."""
        self.stopping = True
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGTERM)

    def kill(self, why: str) -> None:
        """SIGKILL the actor and anything it started (its whole process group)."""
        self.killed = self.killed or why
        kill_group(self.info.pid)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.beat_fd)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


ACTOR_DB = "TRAWL_ACTOR_DB"  # the database URL, handed to an actor through its environment


def spawn(actor_type: ActorType, key: str | None, launch: Launch) -> ActorHandle:
    """Start one actor of *actor_type* for launch *key*."""
    token = secrets.token_hex(3)
    session = session_name(token)
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    argv = [
        sys.executable,
        "-m",
        "trawl.runtime.actor.main",
        "--app",
        launch.app_spec,
        "--task",
        actor_type.name,
        "--token",
        token,
        "--concurrency",
        str(actor_type.concurrency),
        "--grace",
        repr(launch.grace),
        "--beat-fd",
        str(write_fd),
        "--log-level",
        launch.log_level,
    ]
    if key is not None:
        argv += ["--key", key]
    try:
        popen = subprocess.Popen(
            argv,
            # The URL here so a password never shows in `ps`; PGAPPNAME so the orchestrator
            # can tell when the actor's last session has gone (Queues.connected).
            env=os.environ | {ACTOR_DB: launch.url, "PGAPPNAME": session},
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(write_fd,),
            start_new_session=True,
        )
    finally:
        os.close(write_fd)
    info = ActorInfo(
        type=actor_type.name,
        key=key,
        pid=popen.pid,
        owner=owner_id(popen.pid, token),
        tasks=(actor_type.name,),
    )
    child = ActorHandle(info=info, type=actor_type, popen=popen, beat_fd=read_fd, session=session)
    assert popen.stderr is not None
    threading.Thread(
        target=_relay_logs, args=(popen.stderr, child.label), name="trawl-relay", daemon=True
    ).start()
    return child


def owner_id(pid: int, token: str) -> str:
    """The lease owner an actor writes on its jobs (the same shape as a worker's)."""
    return f"{socket.gethostname()}:{pid}:{token}"


def session_name(token: str) -> str:
    """The ``application_name`` of an actor's database sessions: its random token makes it
    unique on a server many orchestrators share, and it fits PostgreSQL's 63 bytes."""
    return f"trawl actor {token}"


def _relay_logs(stream: IO[bytes], label: str) -> None:
    """Re-log what an actor writes on stderr, marked with the actor it came from."""
    with stream:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            if not line:
                continue
            record = relay(line, actor=label)
            record.msg = f"[{label}] {record.msg}"
            logging.getLogger(record.name).handle(record)
