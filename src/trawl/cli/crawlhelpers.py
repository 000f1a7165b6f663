"""`trawl crawl --processes N`: N-1 more processes working on the same crawl.

A crawl's frontier, politeness and slots are in the database, so a second process needs
nothing from the first: each helper is `trawl crawl resume ID --no-progress`, which claims
the crawl's pages beside this process and exits when the crawl is finished. What this
module adds is the lifetime: the helpers stop when this command stops (its end, Ctrl-C,
SIGTERM), and on Linux also when it dies without a word (kill -9), through the kernel's
parent-death signal. Their output is dropped; their warnings and errors reach this
command's stderr.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

log = logging.getLogger("trawl.crawl")

STOP_WAIT = 30.0  # a helper asked to stop finishes its pages' requests within this
_PR_SET_PDEATHSIG = 1


@contextlib.contextmanager
def helpers(
    count: int, crawl_id: int, *, slots: int, lease: float, url: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run *count* helper processes on crawl *crawl_id* (each with *slots* worker slots)
    while the block runs; stop them when it ends."""
    argv = [
        sys.executable,
        "-m",
        "trawl",
        "crawl",
        "resume",
        str(crawl_id),
        "--no-progress",
        "--concurrency",
        str(slots),
        "--lease",
        f"{lease:g}s",
        "--share",
        str(count + 1),
    ]
    started: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            started.append(
                subprocess.Popen(
                    argv,
                    env=os.environ | {"TRAWL_DB": url},  # never the password in argv
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    preexec_fn=_die_with_parent(),  # spawned before any thread starts
                )
            )
        yield started
    finally:
        stop(started)


def stop(children: list[subprocess.Popen[bytes]], wait: float = STOP_WAIT) -> None:
    """SIGTERM (a worker's graceful stop), then SIGKILL for those still there after *wait*;
    a helper that failed is reported."""
    for child in children:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + wait
    for child in children:
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.returncode not in (0, -signal.SIGTERM):
            log.warning("helper process %d exited with status %s", child.pid, child.returncode)


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGTERM the child when this process dies; ``None``
    elsewhere (there a helper killed with its parent works on until the crawl ends)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return hook
