"""Running ``trawl run`` in tests: start it, find its actors, and read what plugins saw.

:data:`RECORDER` is app code (append it after ``workload.APP_PRELUDE``) that registers a
plugin implementing every hook in ``trawl.runtime.hookspecs`` (or those an app lists in
``RECORD_HOOKS``): each call becomes one JSON line in ``events.jsonl`` beside the app, from
whichever process fired it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.procs import Proc, Procs

RECORDER = """
import inspect
import json as _json

from trawl.runtime import hookspecs as _hookspecs


def _brief(name, value):
    if isinstance(value, trawl.ActorInfo):
        return {"actor_type": value.type, "key": value.key, "actor_pid": value.pid}
    if name == "job":
        out = {"item": value.item_id, "attempt": value.attempt}
        if hasattr(value, "outcome"):
            out["outcome"] = str(value.outcome)
        return out
    if name == "exception":
        return {"exception": type(value).__name__}
    if name == "queues":
        return {"queues": {task: queue.depth for task, queue in value.items()}}
    if name == "actors":
        return {"actors": len(value)}
    if name in ("orchestrator", "result"):
        return {}
    return {name: value}


class Recorder:
    def record(self, hook, **args):
        event = {"hook": hook, "pid": os.getpid(), "t": time.time()}
        for name, value in args.items():
            event.update(_brief(name, value))
        line = _json.dumps(event, default=str) + "\\n"
        fd = os.open(HERE / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _impl(name, argnames):
    namespace = {}
    params = ", ".join(argnames)
    keywords = ", ".join(f"{a}={a}" for a in argnames)
    exec(f"def {name}(self, {params}):\\n    self.record({name!r}, {keywords})\\n", namespace)
    return trawl.hookimpl(namespace[name])


_only = globals().get("RECORD_HOOKS")  # an app may set it to record only these hooks
for _name, _spec in vars(_hookspecs).items():
    if _name.startswith("trawl_") and (_only is None or _name in _only):
        setattr(Recorder, _name, _impl(_name, list(inspect.signature(_spec).parameters)))

app.plugins.append(Recorder())
"""


@dataclass(frozen=True, slots=True)
class Event:
    hook: str
    pid: int
    t: float
    fields: dict[str, Any]

    def get(self, name: str) -> Any:
        return self.fields.get(name)


def events(directory: Path) -> list[Event]:
    """Every hook call recorded so far, in the order they were written."""
    path = directory / "events.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        raw = json.loads(line)
        out.append(Event(raw.pop("hook"), raw.pop("pid"), raw.pop("t"), raw))
    return out


def hooks(found: Iterable[Event]) -> list[str]:
    return [e.hook for e in found]


def run(
    procs: Procs,
    app: str,
    db: str,
    *args: str,
    name: str | None = None,
) -> Proc:
    """Start ``trawl --db DB run APP --no-progress ARGS...``."""
    argv = ["--db", db, "run", app, "--no-progress", *args]
    return procs.trawl(*argv, name=name or f"run-{len(procs.started)}")


def actor_pids(parent: int) -> list[int]:
    """The live actor processes of the orchestrator *parent* (Linux: read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        actor = b"trawl.runtime.actor.main" in cmdline
        if actor and int(fields[1]) == parent and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def max_alive(found: Sequence[Event], actor_type: str | None = None) -> int:
    """The most actors alive at once, from the orchestrator's spawned/exited events."""
    level = peak = 0
    for event in found:
        if actor_type is not None and event.get("actor_type") != actor_type:
            continue
        if event.hook == "trawl_actor_spawned":
            level += 1
            peak = max(peak, level)
        elif event.hook == "trawl_actor_exited":
            level -= 1
    return peak


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
