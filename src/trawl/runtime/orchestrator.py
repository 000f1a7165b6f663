"""The orchestrator: the one supervisor of a collection on this machine (``trawl run``).

Each tick it reaps actors that ended (settling the jobs a dead one held), kills actors whose
event loop stopped beating for longer than their task's timeout, reads every actor type's
queue, warns once about orphaned tasks, tells plugins, and starts the actors the spawn
policy asks for within the per-type and global caps. SIGINT/SIGTERM stop it gracefully.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from types import FrameType
from typing import Any

from trawl.engine.keyed import KEY_WINDOW
from trawl.model.errors import DatabaseUnavailable, InvalidInput
from trawl.model.records import TaskCounts
from trawl.runtime import hookspecs
from trawl.runtime.actor.handle import (
    EXIT_REPLACE,
    EXIT_START_FAILED,
    ActorHandle,
    Launch,
    kill_group,
    spawn,
)
from trawl.runtime.actor.hooks import transitions
from trawl.runtime.actor.spec import ActorType, QueueInfo, actor_key
from trawl.runtime.app import App, TaskDef
from trawl.runtime.lock import OrchestratorLock
from trawl.runtime.metrics import Metrics
from trawl.runtime.outcome import due_again_in
from trawl.runtime.plugins import Plugins, for_app
from trawl.runtime.settle import Death, held_jobs, settle
from trawl.store.notify import Listener
from trawl.store.store import Store
from trawl.store.url import display

log = logging.getLogger("trawl.orchestrator")

DEPTH_CAP = 10_000  # queue depths are counted up to this
STARTUP_LIMIT = 60.0  # seconds an actor may take to start beating
STALL_SLACK = 3.0  # beyond its task's timeout, before a silent actor is killed
STOP_SLACK = 5.0  # beyond the grace period, before a stopping actor is killed
IDLE_EXIT = 1.0  # seconds nothing must be due before --exit-when-idle exits
IDLE_COOLDOWN = 1.0  # before an actor type/key that just went idle is started again
MOURN_LIMIT = 60.0  # seconds a dead actor's database session may outlive it
CRASH_BACKOFF_MAX = 30.0


def default_max_actors() -> int:
    return max(2, os.cpu_count() or 2)


class Orchestrator:
    """Runs *app*'s actors on this machine until stopped (or idle, if asked).

    Plugins may read ``pid``, ``url``, ``app``, ``actor_types``, ``max_actors``,
    ``queues`` (the last tick's), ``actors`` (alive, by pid), ``orphans`` and ``metrics``.
    """

    def __init__(
        self,
        app: App,
        *,
        app_spec: str,
        url: str | None = None,
        max_actors: int | None = None,
        concurrency: int = 16,
        exit_when_idle: bool = False,
        grace: float = 30.0,
        tick: float = 0.25,
        poll: float = 1.0,
        plugins: Plugins | None = None,
        log_level: str = "info",
    ) -> None:
        self.app = app
        self.url = url or app.db
        self.pid = os.getpid()
        self.max_actors = max_actors or default_max_actors()
        self.actor_types = {d.name: _actor_type(app, d, concurrency) for d in app.local()}
        self.exit_when_idle = exit_when_idle
        self._retries_until = 0.0  # monotonic: when the last retry it set at a death comes due
        self.grace = grace
        self.tick_interval = tick
        self.poll = poll
        self.launch = Launch(app_spec=app_spec, url=self.url, grace=grace, log_level=log_level)
        self.metrics = Metrics()
        self.plugins = plugins or for_app(app)
        self.plugins.register(self.metrics, "trawl.metrics")
        self.actors: dict[int, ActorHandle] = {}
        self.queues: dict[str, QueueInfo] = {}
        self.orphans: dict[str, int] = {}
        self._warned: set[str] = set()
        self._unsettled: list[tuple[ActorHandle, Death, str]] = []
        # Dead actors whose database session may still commit a claim: (actor, death, why,
        # when it was reaped).
        self._mourning: list[tuple[ActorHandle, Death, str, float]] = []
        self._cooldown: dict[tuple[str, str | None], tuple[float, float]] = {}
        self._wake = threading.Event()  # new work was announced (PostgreSQL), or stop
        self._stopped = threading.Event()
        self._stopping = False
        self._hard = False
        self._store: Store | None = None
        self._status: tuple[float, list[TaskCounts]] = (0.0, [])

    # -- lifecycle ------------------------------------------------------------------------

    def run(self) -> int:
        """Hold the collection's lock and supervise until stopped; returns the exit code."""
        with OrchestratorLock(self.url), Store(self.url) as store:
            self._store = store
            self._prepare(store)
            listener = Listener(self.url, self._wake.set)
            listener.start()
            previous = self._install_signals()
            log.info(
                "orchestrator %d: %d actor types on %s, at most %d actors",
                self.pid,
                len(self.actor_types),
                display(self.url),
                self.max_actors,
            )
            self.plugins.fire(hookspecs.trawl_orchestrator_startup, orchestrator=self)
            try:
                self._loop(store)
            finally:
                self._stop_actors(store)
                self.plugins.fire(hookspecs.trawl_orchestrator_shutdown, orchestrator=self)
                listener.stop()
                _restore_signals(previous)
        log.info("orchestrator %d stopped: %s", self.pid, self.metrics.line())
        return 0

    def stop(self) -> None:
        """Stop spawning, ask the actors to finish, then exit (a second call kills them)."""
        self._hard = self._stopping
        self._stopping = True
        self._stopped.set()
        self._wake.set()

    def _prepare(self, store: Store) -> None:
        store.ensure_schema(auto=store.is_sqlite)
        defs = list(self.app.tasks.values())
        for task, count in store.register_tasks(d.info() for d in defs).items():
            log.info("task %s has a new version: %d results are due again", task, count)
        limits = {lim.name: lim for d in defs for lim in self.app.limits_for(d)}
        store.register_limits([limits[name] for name in sorted(limits)])

    def _loop(self, store: Store) -> None:
        idle_since: float | None = None
        while not self._stopping:
            waiting = time.monotonic() < self._retries_until  # a retry it set is to come
            busy = self._tick(store) or bool(self.actors) or waiting or bool(self._mourning)
            idle_since = None if busy else idle_since or time.monotonic()
            # Idle for a moment, not one tick: an actor that just exited may have left a
            # retry due in a fraction of a second.
            if self.exit_when_idle and idle_since and time.monotonic() - idle_since >= IDLE_EXIT:
                log.info("nothing is due and no actor runs: exiting")
                return
            self._pause(busy)

    def _pause(self, busy: bool) -> None:
        """Between ticks: a tick's time while busy; while idle, until work is announced
        (PostgreSQL) or a poll's time passed. Announcements never make busy ticks faster:
        under load every commit announces work."""
        if busy:
            self._stopped.wait(self.tick_interval)
        else:
            self._wake.wait(self.poll)
        self._wake.clear()

    # -- one tick -------------------------------------------------------------------------

    def _tick(self, store: Store) -> bool:
        """One pass of the run loop; whether any actor type has due work."""
        self._reap()
        self._watch()
        try:
            self._settle_dead(store)
            now = store.clock()
            self.queues = self._read_queues(store, now)
            self._warn_orphans(store, now)
        except DatabaseUnavailable as error:
            log.warning("cannot read the queues, trying again: %s", error)
            self._stopped.wait(min(self.poll * 2, 5.0))
            return True
        actors = [a.info for a in self.actors.values()]
        self.plugins.fire(
            hookspecs.trawl_orchestrator_tick, orchestrator=self, queues=self.queues, actors=actors
        )
        busy = any(q.depth for q in self.queues.values())
        if not busy:
            self.plugins.fire(hookspecs.trawl_orchestrator_idle, orchestrator=self)
        elif not self._stopping:
            self._spawn()
        return busy

    def _read_queues(self, store: Store, now: float) -> dict[str, QueueInfo]:
        names = list(self.actor_types)
        paused = store.gates.paused(names) if names else set()
        serving = [n for n in names if n not in paused]
        depths = store.queues.due_counts(serving, now, DEPTH_CAP)
        found = {name: _queue(0, {}) for name in paused}
        for name, depth in depths.items():
            keys: dict[str | None, int] = {None: depth}
            actor_type = self.actor_types[name]
            if depth and actor_type.spec.key is not None:
                sample = store.queues.due_sample(name, now, KEY_WINDOW)
                keys = dict(Counter(actor_key(actor_type.spec.key, i, d) for i, d in sample))
            found[name] = _queue(depth, keys)
        return found

    def _warn_orphans(self, store: Store, now: float) -> None:
        # Tasks an external executor runs are served by its feeder, not by actors here.
        served = [*self.actor_types, *(d.name for d in self.app.tasks.values() if not d.is_local)]
        self.orphans = store.queues.orphans(served, now, DEPTH_CAP)
        for task, count in self.orphans.items():
            if task not in self._warned:
                self._warned.add(task)
                log.warning(
                    "orphaned task %s: %s due jobs, but this app declares no such task, so "
                    "no actor will run them (serve it again, or expire or remove its tag)",
                    task,
                    f"{count:,}+" if count >= DEPTH_CAP else f"{count:,}",
                )

    # -- spawning -------------------------------------------------------------------------

    def _spawn(self) -> None:
        room = self.max_actors - len(self.actors)
        if room <= 0:
            return
        wanted = {}
        for name, actor_type in self.actor_types.items():
            queue = self.queues.get(name)
            if queue is None or not queue.depth:
                continue
            running = [a.info for a in self.actors.values() if a.type.name == name]
            keys = [k for k in actor_type.to_spawn(queue, running) if not self._cooling(name, k)]
            if keys:
                wanted[name] = keys
        order = sorted(wanted, key=lambda n: (self.actor_types[n].niceness, n))
        for name, key in _round_robin(order, wanted, room):
            self._start(self.actor_types[name], key)

    def _start(self, actor_type: ActorType, key: str | None) -> None:
        try:
            child = spawn(actor_type, key, self.launch)
        except OSError as error:
            log.error("cannot start an actor of %s: %s", actor_type.name, error)
            self._cool(actor_type.name, key, crashed=True)
            return
        self.actors[child.info.pid] = child
        log.info("started actor %s", child.label)
        self.plugins.fire(hookspecs.trawl_actor_spawned, orchestrator=self, actor=child.info)

    def _cooling(self, name: str, key: str | None) -> bool:
        until, _ = self._cooldown.get((name, key), (0.0, 0.0))
        return time.monotonic() < until

    def _cool(self, name: str, key: str | None, *, crashed: bool) -> None:
        _, last = self._cooldown.get((name, key), (0.0, 0.0))
        delay = min(CRASH_BACKOFF_MAX, max(1.0, last * 2)) if crashed else IDLE_COOLDOWN
        self._cooldown[(name, key)] = (time.monotonic() + delay, delay if crashed else 0.0)

    # -- reaping and watching -------------------------------------------------------------

    def _reap(self) -> None:
        for pid, child in list(self.actors.items()):
            child.beat()
            code = child.poll()
            if code is None:
                continue
            del self.actors[pid]
            child.close()
            reason, death = self._ending(child, code)
            if death in (Death.CRASHED, Death.STALLED, Death.STOPPED):
                kill_group(pid)  # whatever it started (a browser) goes with it
            self._unsettled.append((child, death, _why(child, code, reason)))
            self._after_exit(child, code, reason)

    def _ending(self, child: ActorHandle, code: int) -> tuple[str, Death]:
        if child.killed == "stalled":
            return "killed", Death.STALLED
        if child.killed is not None:
            return "killed", Death.STOPPED
        if code == 0:
            return ("stopped" if child.stopping else "idle"), Death.CLEAN
        if code == EXIT_REPLACE:
            return "replaced", Death.CLEAN
        if code == EXIT_START_FAILED:
            return "failed to start", Death.CRASHED
        return "crashed", Death.CRASHED

    def _after_exit(self, child: ActorHandle, code: int, reason: str) -> None:
        info = child.info
        if reason in ("crashed", "failed to start"):
            log.warning("actor %s %s (exit %s)", child.label, reason, _code(code))
            # Back off from a crash loop: an actor that fails by itself before it ever
            # beat. One killed by a signal from outside is simply started again.
            if reason == "failed to start" or (code > 0 and child.last_beat is None):
                self._cool(info.type, info.key, crashed=True)
        elif reason == "replaced":
            log.info("actor %s exited to shed a stuck task; it will be replaced", child.label)
        elif reason == "idle":
            log.debug("actor %s exited: its queue is empty", child.label)
            self._cool(info.type, info.key, crashed=False)
        self.plugins.fire(
            hookspecs.trawl_actor_exited,
            orchestrator=self,
            actor=info,
            returncode=code,
            reason=reason,
        )

    def _settle_dead(self, store: Store) -> None:
        """Commit what each dead actor's death means for the jobs it still held: at once,
        and again once its last database session has gone. PostgreSQL finishes a COMMIT
        whose client was killed while waiting for it, so a claim an actor sent just before
        it died can land after the first settling; unsettled, those jobs would wait for
        their lease to lapse, and --exit-when-idle would not see them as due."""
        while self._unsettled:
            child, death, why = self._unsettled[0]
            self._settle(store, child, death, why)
            self._unsettled.pop(0)
            # A clean exit saw its last commit answered; on SQLite a dead process's
            # transaction committed before it died or never.
            if death is not Death.CLEAN and not store.is_sqlite:
                self._mourning.append((child, death, why, time.monotonic()))
        if not self._mourning:
            return
        connected = store.queues.connected([entry[0].session for entry in self._mourning])
        for entry in list(self._mourning):
            child, death, why, since = entry
            if child.session in connected:
                if time.monotonic() - since < MOURN_LIMIT:
                    continue
                log.warning(
                    "actor %s died over %.0fs ago but its database session is still open; jobs"
                    " it may yet hold are settled when their leases lapse",
                    child.label,
                    MOURN_LIMIT,
                )
            self._settle(store, child, death, why)
            self._mourning.remove(entry)

    def _settle(self, store: Store, child: ActorHandle, death: Death, why: str) -> None:
        task = self.app.tasks[child.info.type]
        held = held_jobs(store, task.name, child.info.owner)
        results, report = settle(store, task, held, death, why)
        ahead = due_again_in(results, report)
        self._retries_until = max(self._retries_until, time.monotonic() + ahead)
        if results:
            log.warning("actor %s held %d jobs: %s", child.label, len(results), _settled(death))
            transitions(self.plugins, child.info, results, report)

    def _watch(self) -> None:
        """Kill actors whose event loop has not beaten for longer than their tick may take."""
        now = time.monotonic()
        for child in self.actors.values():
            if child.killed is not None:
                continue
            limit = STARTUP_LIMIT if child.last_beat is None else child.type.timeout + STALL_SLACK
            silent = child.silent_for(now)
            if silent > limit:
                log.warning(
                    "actor %s has been unresponsive for %.1fs (task timeout %gs): killing it",
                    child.label,
                    silent,
                    child.type.timeout,
                )
                child.kill("stalled" if child.last_beat is not None else "did not start")

    # -- stopping -------------------------------------------------------------------------

    def _stop_actors(self, store: Store) -> None:
        if self.actors:
            log.info(
                "stopping %d actors (up to %gs for running tasks)", len(self.actors), self.grace
            )
        for child in self.actors.values():
            child.terminate()
        deadline = time.monotonic() + self.grace + STOP_SLACK
        while self.actors and time.monotonic() < deadline and not self._hard:
            self._reap()
            time.sleep(0.05)  # reaping is the event; a second signal sets _hard
        for child in self.actors.values():
            child.kill("shutdown")
        for child in list(self.actors.values()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.popen.wait(timeout=10)
        self._reap()
        deadline = time.monotonic() + STOP_SLACK
        try:
            self._settle_dead(store)
            while self._mourning and time.monotonic() < deadline:
                time.sleep(0.05)  # a killed actor's last commit, if any, is still landing
                self._settle_dead(store)
        except DatabaseUnavailable as error:
            log.warning("could not release the leases of killed actors: %s", error)

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._stopping:
            log.warning("second %s: killing the actors now; their leases are released", name)
        else:
            log.info(
                "%s: stopping %d actors (up to %gs); press again to kill them at once",
                name,
                len(self.actors),
                self.grace,
            )
        self.stop()

    # -- for plugins ----------------------------------------------------------------------

    def status(self, max_age: float = 2.0) -> list[TaskCounts]:
        """``trawl status`` counts for every task, at most *max_age* seconds old."""
        taken, rows = self._status
        if self._store is not None and time.monotonic() - taken >= max_age:
            try:
                rows = self._store.status()
            except DatabaseUnavailable:
                return rows
            self._status = (time.monotonic(), rows)
        return rows


def _actor_type(app: App, task: TaskDef, concurrency: int) -> ActorType:
    spec = task.actor
    if spec.key is not None and (
        task.schedule.depends_on or task.schedule.visit_weights or app.limits_for(task)
    ):
        raise InvalidInput(
            f"task {task.name!r}: an actor key cannot be combined (yet) with rate limits, "
            "depends_on or revisit policies; declare the task with exempt_global=True and "
            "without them, or drop the key"
        )
    return ActorType(
        name=task.name,
        timeout=task.timeout,
        niceness=task.niceness,
        spec=spec,
        concurrency=spec.concurrency or concurrency,
    )


def _queue(depth: int, keys: dict[str | None, int]) -> QueueInfo:
    return QueueInfo(depth=depth, capped=depth >= DEPTH_CAP, keys=keys)


def _round_robin(
    order: list[str], wanted: dict[str, list[str | None]], room: int
) -> Iterator[tuple[str, str | None]]:
    """One actor per type in turn, so a busy type cannot take the whole global cap."""
    turn = 0
    while room > 0 and any(wanted[n] for n in order):
        for name in order:
            if room > 0 and len(wanted[name]) > turn:
                yield name, wanted[name][turn]
                room -= 1
        turn += 1
        if all(len(wanted[n]) <= turn for n in order):
            return


def _why(child: ActorHandle, code: int, reason: str) -> str:
    if child.killed == "stalled":
        return (
            f"task {child.info.type!r} exceeded its timeout of {child.type.timeout:g}s: its "
            f"actor's event loop was blocked, so the orchestrator killed actor {child.label}"
        )
    return f"actor {child.label} {reason} (exit {_code(code)}) while running this attempt"


def _code(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return str(code)


def _settled(death: Death) -> str:
    if death is Death.STALLED:
        return "recorded as timed out, retried by their retry policy"
    if death is Death.CRASHED:
        return "recorded as failed (the actor died), due again at once while retries remain"
    return "handed back, due again at once"


def _restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
