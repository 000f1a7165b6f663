"""``bench/run --profile``: one worker on the no-op workload under py-spy, summarised.

Writes ``results/profile-<backend>.txt`` next to the raw collapsed stacks
``results/profile-<backend>.raw`` (feed them to flamegraph.pl or speedscope). Every thread is
sampled all the time (``--idle``); samples waiting in select, on the thread pool's queue or
on the server count as waiting, the rest as busy. The summary gives each thread's busy share
(is one thread the bottleneck?) and the top functions of the busy samples; start-up imports
are one line of their own.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
from pathlib import Path

from harness import backends, seed, trawl_db, workers
from harness.plan import Plan
from harness.progress import say
from harness.report import RESULTS

RATE = 250  # samples per second
TOP = 15
_FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^:()]*)(?::\d+)?\)$")


def main(chosen: list[str], plan: Plan) -> int:
    spy = shutil.which("py-spy", path=str(workers.VENV_BIN)) or shutil.which("py-spy")
    if spy is None:
        say("installing py-spy into .venv (a profiler only the benchmark uses)")
        pip = [str(workers.VENV_BIN / "python"), "-m", "pip", "install", "--quiet", "py-spy"]
        if subprocess.run(pip, check=False).returncode != 0:
            print("py-spy could not be installed: .venv/bin/pip install py-spy")
            return 1
        spy = shutil.which("py-spy", path=str(workers.VENV_BIN))
        assert spy is not None
    jobs = max(plan.process_jobs, 20_000)
    for name in chosen:
        backend = backends.open_backend(name)
        try:
            raw = _record(spy, backend, jobs, plan.concurrency)
        finally:
            backend.close()
        summary = summarise(
            raw.read_text(),
            f"{name}, {jobs} no-op jobs, 1 worker x{plan.concurrency}, {RATE} samples/s",
        )
        text_path = raw.with_suffix(".txt")
        text_path.write_text(summary)
        print(summary)
        print(f"(written to {text_path} and {raw})\n")
    return 0


def _record(spy: str, backend: backends.Backend, jobs: int, concurrency: int) -> Path:
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"profile-{backend.name}.raw"
    with backend.database("profile") as url:
        trawl_db.prepare(url)
        seed.fill(backend, url, [(seed.Kind.DUE, 1, jobs)])
        say(f"profiling a worker on {jobs} no-op jobs ({backend.name})")
        command = [
            spy,
            "record",
            "--idle",
            "--threads",
            "--format",
            "raw",
            "--rate",
            str(RATE),
            "--output",
            str(out),
            "--",
            *workers.command(url, concurrency),
        ]
        subprocess.run(command, check=True, capture_output=True)
    return out


# Leaf frames where a thread waits rather than works: the event loop's select, the database
# thread's idle queue, the driver waiting on the server, the LISTEN thread.
WAITING = (
    "EpollSelector.select (selectors.py)",
    "_worker (concurrent/futures/thread.py)",
    "Connection.wait (psycopg/connection.py)",
    "Connection.notifies (psycopg/connection.py)",
    "Condition.wait (threading.py)",
    "Event.wait (threading.py)",
)


def summarise(raw: str, title: str) -> str:
    """Per thread: how much of the time it worked; then the top functions of the work."""
    threads: collections.Counter[str] = collections.Counter()
    waiting: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    startup = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        thread, frames = _split(stack)
        if any(f.startswith("_find_and_load ") for f in frames):
            startup += count
            continue
        threads[thread] += count
        if not frames or frames[-1] in WAITING:
            waiting[thread] += count
            continue
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    work = sum(own.values())
    lines = [
        f"profile: {title}",
        f"wall-clock samples of every thread; start-up imports: {startup / RATE:.1f}s",
        "",
        "per thread after start-up (busy = not waiting in select, queue, socket):",
    ]
    for thread, n in threads.most_common():
        busy = n - waiting[thread]
        lines.append(f"  {thread:<16} {n / RATE:6.2f}s  busy {_pct(busy, n):>6}")
    lines += ["", f"top {TOP} by self time (share of busy samples, all threads):"]
    lines += [f"  {_pct(n, work):>6}  {fn}" for fn, n in own.most_common(TOP)]
    lines += ["", f"top {TOP} trawl functions by inclusive time (share of busy samples):"]
    ours = [(fn, n) for fn, n in inclusive.most_common() if "trawl/" in fn]
    lines += [f"  {_pct(n, work):>6}  {fn}" for fn, n in ours[:TOP]]
    return "\n".join(lines) + "\n"


def _split(stack: str) -> tuple[str, list[str]]:
    """py-spy --threads puts 'thread (tid): name' first; some samples lack the name."""
    frames = stack.split(";")
    thread = "?"
    if frames and frames[0].startswith("thread ("):
        head = frames.pop(0)
        thread = head.split("): ", 1)[1] if "): " in head else head
    return thread, [_name(f) for f in frames]


def _name(frame: str) -> str:
    """'fn (path/to/file.py:12)' -> 'fn (path/to/file.py)' so lines of one function add up."""
    match = _FRAME.match(frame)
    return f"{match['fn']} ({match['file']})" if match else frame


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.1f}%" if total else "-"
