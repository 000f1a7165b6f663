"""Real trawl processes for acceptance tests: start them, signal them, and never leak them.

Each process runs the installed ``trawl`` command in its own session (so a signal meant for
it reaches nothing else), with stdout and stderr going to files (so a chatty process can
never block on a full pipe). :class:`Procs` kills whatever is still running when a test
ends, pass or fail.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def trawl_command() -> list[str]:
    """How to run the CLI: the ``trawl`` script installed next to this Python."""
    script = Path(sys.executable).with_name("trawl")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "trawl"]


def wait_for(check: Callable[[], T], what: str, timeout: float = 30.0, interval: float = 0.02) -> T:
    """Poll *check* until it returns something truthy; fail naming *what* after *timeout*."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def descendants(pid: int) -> list[int]:
    """The processes below *pid*, read from /proc (Linux)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


class Proc:
    """One running trawl command."""

    def __init__(self, name: str, argv: Sequence[str], logs: Path, env: dict[str, str]) -> None:
        self.name = name
        self.argv = list(argv)
        self.out_path, self.err_path = logs / f"{name}.out", logs / f"{name}.err"
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,
            )
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, sig: signal.Signals) -> None:
        self.popen.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        if self.alive:
            self.popen.kill()
        self.popen.wait()

    def wait(self, timeout: float) -> int:
        """The exit code; fails the test (showing stderr) if it is still running."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} still running after {timeout:g}s; stderr:\n{self.stderr()}"
            ) from None

    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def describe(self) -> str:
        """Everything a failing assertion should show about this process."""
        return (
            f"{self.name} (pid {self.pid}, exit {self.popen.returncode}): {' '.join(self.argv)}\n"
            f"--- stdout\n{self.stdout()}--- stderr\n{self.stderr()}"
        )


class Procs:
    """Starts trawl processes for one test; :meth:`close` kills the ones still running."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started: list[Proc] = []
        self.env = {k: v for k, v in os.environ.items() if k != "TRAWL_DB"}
        self.env["PYTHONUNBUFFERED"] = "1"

    def trawl(self, *args: str, name: str | None = None) -> Proc:
        """Start ``trawl ARGS...``."""
        proc = Proc(
            name or f"trawl-{len(self.started)}", [*trawl_command(), *args], self.logs, self.env
        )
        self.started.append(proc)
        return proc

    def worker(
        self,
        app: str,
        db: str,
        *,
        concurrency: int = 4,
        grace: float | None = None,
        exit_when_idle: bool = False,
        name: str | None = None,
    ) -> Proc:
        """Start ``trawl worker APP --db DB ...`` with progress display off."""
        args = ["--db", db, "worker", app, "--concurrency", str(concurrency), "--no-progress"]
        if grace is not None:
            args += ["--grace", f"{grace:g}"]
        if exit_when_idle:
            args.append("--exit-when-idle")
        return self.trawl(*args, name=name or f"worker-{len(self.started)}")

    def close(self) -> None:
        """Kill every process started here, and their children: an orchestrator's actors
        are in sessions of their own, and outlive a kill -9 of it by design."""
        for proc in self.started:
            children = descendants(proc.pid) if proc.alive else []
            proc.kill()
            for pid in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def __enter__(self) -> Procs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def running(logs: Path) -> Iterator[Procs]:
    """Fixture body: a :class:`Procs` whose processes die with the test."""
    with Procs(logs) as procs:
        yield procs
