"""``trawl run``: the orchestrator spawns actors within caps, takes over from a killed
orchestrator, replaces stuck and dead actors, and warns about orphaned tasks."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from tests.support import orchestra, workload
from tests.support.procs import Procs, running, wait_for
from trawl.model.records import NewItem
from trawl.runtime.loader import load_app
from trawl.runtime.plugins import Plugins
from trawl.store.store import Store

pytestmark = pytest.mark.slow


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def _seed(url: str, app: str, items: dict[str, str]) -> None:
    """Register *app*'s tasks and add items (id -> tag)."""
    with Store(url) as store:
        store.register_tasks(d.info() for d in load_app(app).tasks.values())
        store.add_items([NewItem(id=i, tags=((tag, None),)) for i, tag in items.items()])


def _done_once(url: str, ids: list[str]) -> None:
    entries = workload.journal(url)
    done = workload.kinds_by_item(entries, "job.done")
    twice = {i: n for i, n in done.items() if n != 1}
    never = sorted(set(ids) - set(done))
    story = {
        i: [(e.kind, (e.detail or {}).get("error_type")) for e in entries if e.item_id == i]
        for i in never[:5]
    }
    assert not twice, f"done twice: {twice}"
    assert not never, f"never done: {never}; the first ones' journal: {story}"


ORCHESTRATOR_HOOKS = """
RECORD_HOOKS = {"trawl_actor_spawned", "trawl_actor_exited", "trawl_orchestrator_idle"}
"""

BURST_APP = """
for _name in ("one", "two", "three"):
    async def _work(ctx):
        await asyncio.sleep(0)
        return None

    app.task(name=_name, tags=[_name], actor=trawl.Actor(max_actors=3, linger=0.2))(_work)
"""


def test_spawning_obeys_per_type_and_global_caps_and_actors_exit_when_idle(
    db_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, BURST_APP + ORCHESTRATOR_HOOKS + orchestra.RECORDER)
    tags = ("one", "two", "three")
    items = {f"item:{n:05d}": tags[n % 3] for n in range(10_000)}
    _seed(db_url, app, items)

    run = orchestra.run(procs, app, db_url, "--max-actors", "4", "--concurrency", "32")
    wait_for(lambda: workload.done_count(db_url) == len(items), "every job to be done", 120)
    # Nothing is due any more: each actor exits once its queue stays empty, while the
    # orchestrator (started without --exit-when-idle) keeps running, idle.
    wait_for(lambda: not orchestra.actor_pids(run.pid), "the actors to exit when idle", 15)
    assert run.alive, run.describe()
    wait_for(
        lambda: "trawl_orchestrator_idle" in orchestra.hooks(orchestra.events(here)),
        "the orchestrator to report itself idle",
    )
    run.send(signal.SIGTERM)
    assert run.wait(timeout=15) == 0, run.describe()

    events = [e for e in orchestra.events(here) if e.pid == run.pid]
    assert orchestra.max_alive(events) == 4, "the global cap was not reached, or exceeded"
    for tag in tags:
        assert 1 <= orchestra.max_alive(events, tag) <= 3, f"{tag}: per-type cap broken"
    exits = [e for e in events if e.hook == "trawl_actor_exited"]
    spawned = [e for e in events if e.hook == "trawl_actor_spawned"]
    assert len(exits) == len(spawned)
    assert {e.get("reason") for e in exits} <= {"idle", "stopped"}
    _done_once(db_url, list(items))


# item:hold waits for the file "go"; every run records its pid.
HOLD_APP = """
@app.task(tags=["t"], timeout="60s")
async def work(ctx):
    start = time.time()
    if ctx.id == "item:hold":
        (HERE / "holding").write_text(str(os.getpid()))
        while not (HERE / "go").exists():
            await asyncio.sleep(0.02)
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return None
"""


def test_a_second_orchestrator_refuses_and_one_started_after_a_kill_9_takes_over(
    db_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, HOLD_APP)
    ids = ["item:hold", *(f"item:{n}" for n in range(20))]
    workload.seed(db_url, app, ids)

    first = orchestra.run(procs, app, db_url, "--grace", "1", name="first")
    holder = int(wait_for(lambda: _read(here / "holding"), "the first orchestrator's actor"))
    second = orchestra.run(procs, app, db_url, name="second")
    assert second.wait(timeout=30) == 1, second.describe()
    assert f"another orchestrator (pid {first.pid}) is already running" in second.stderr()
    assert first.alive, "the refused orchestrator must not disturb the running one"

    first.send(signal.SIGKILL)
    assert first.wait(timeout=10) == -signal.SIGKILL
    # Its actor sees the heartbeat pipe break: it stops, handing item:hold back.
    wait_for(lambda: not orchestra.alive(holder), "the orphaned actor to exit", 15)

    third = orchestra.run(procs, app, db_url, "--exit-when-idle", name="third")
    wait_for(lambda: "started actor" in third.stderr(), "the new orchestrator to take over")
    (here / "go").touch()
    assert third.wait(timeout=60) == 0, third.describe()
    assert "another orchestrator" not in third.stderr()
    _done_once(db_url, ids)
    runs = {r.item: r for r in workload.runs(here)}
    assert runs["item:hold"].pid != holder


LOOP_APP = """
@app.task(tags=["t"], timeout="1s", retries=2, backoff="0.2s", actor=trawl.Actor(max_actors=1))
def work(ctx):
    start = time.time()
    if ctx.id == "item:loop" and ctx.attempt == 1:
        (HERE / "looping").write_text(f"{os.getpid()} {start}")
        while True:  # ignores every attempt to stop it; only its process dying ends it
            pass
    time.sleep(0.05)
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return None
"""


def test_a_sync_task_stuck_in_a_loop_is_cut_off_at_its_timeout_and_its_actor_replaced(
    sqlite_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, LOOP_APP + orchestra.RECORDER)
    others = [f"item:{n:02d}" for n in range(30)]
    workload.seed(sqlite_url, app, ["item:loop", *others], niceness={"item:loop": -1})

    run = orchestra.run(procs, app, sqlite_url, "--exit-when-idle", "--grace", "5")
    assert run.wait(timeout=60) == 0, run.describe()

    pid, started = _read(here / "looping").split()
    assert not orchestra.alive(int(pid)), "the actor with the stuck thread must be gone"
    with Store(sqlite_url) as store:
        failures = store.failures(task="work")
    # Judged by what was recorded, not by how soon on a busy machine: the attempt failed
    # as a timeout (never before its 1 s), and its actor exited as "replaced" (shedding
    # the stuck thread), not "killed" (the slower blocked-loop watchdog).
    assert [(f.item_id, f.attempt, f.error_type) for f in failures] == [
        ("item:loop", 1, "TaskTimeout")
    ]
    assert "exceeded its timeout of 1s" in failures[0].message
    took = failures[0].occurred_at - float(started)
    assert took >= 1.0, f"the timeout was recorded {took:.2f}s after the start"
    runs = {r.item: r for r in workload.runs(here)}
    assert (runs["item:loop"].attempt, runs["item:loop"].pid != int(pid)) == (2, True)
    assert runs["item:loop"].start >= failures[0].occurred_at + 0.1, "retried before backoff"
    _done_once(sqlite_url, ["item:loop", *others])
    exits = [e for e in orchestra.events(here) if e.hook == "trawl_actor_exited"]
    assert [e.get("reason") for e in exits if e.get("actor_pid") == int(pid)] == ["replaced"]


# backoff 5s: the retry comes due after every actor has exited idle, so --exit-when-idle
# must wait for it (the orchestrator set it when it killed the actor).
BLOCKING_APP = """
@app.task(
    tags=["t"], timeout="1s", retries=1, backoff="5s", actor=trawl.Actor(concurrency=1)
)
async def work(ctx):
    start = time.time()
    if ctx.id == "item:block" and ctx.attempt == 1:
        (HERE / "blocking").write_text(f"{os.getpid()} {start}")
        time.sleep(3600)  # a blocking call in a coroutine: the event loop stops with it
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return None
"""


def test_an_actor_whose_event_loop_is_blocked_is_killed_and_its_job_retried(
    sqlite_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, BLOCKING_APP)
    workload.seed(sqlite_url, app, ["item:block", "item:after"], niceness={"item:block": -1})

    run = orchestra.run(procs, app, sqlite_url, "--exit-when-idle")
    assert run.wait(timeout=60) == 0, run.describe()

    pid, started = _read(here / "blocking").split()
    assert not orchestra.alive(int(pid))
    with Store(sqlite_url) as store:
        (failure,) = store.failures(task="work")
    assert (failure.item_id, failure.attempt, failure.error_type) == (
        "item:block",
        1,
        "TaskTimeout",
    )
    assert "event loop was blocked" in failure.message
    took = failure.occurred_at - float(started)
    assert 1.0 <= took <= 8.0, f"killed {took:.2f}s after the start (timeout 1s + slack)"
    assert "unresponsive" in run.stderr()
    _done_once(sqlite_url, ["item:block", "item:after"])


# retries=20: a job held by killed actors again and again (likelier on a loaded machine,
# where each attempt runs longer) would otherwise fail for good after three, and this test
# is about losing and repeating nothing, not about running out of retries.
CHURN_APP = """
@app.task(tags=["t"], timeout="30s", retries=20, actor=trawl.Actor(max_actors=4))
async def work(ctx):
    start = time.time()
    # 64 slots at ~75 ms a job: about 850 jobs/s at best, so 5,000 jobs take several
    # seconds (several kills) however fast the engine gets.
    await asyncio.sleep(random.uniform(0.05, 0.1))
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return {"attempt": ctx.attempt}
"""


def test_kill_9_of_a_random_actor_every_second_loses_and_repeats_no_job(
    db_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(
        here,
        CHURN_APP
        + 'RECORD_HOOKS = {"trawl_actor_spawned", "trawl_actor_exited"}\n'
        + orchestra.RECORDER,
    )
    ids = [f"item:{n:04d}" for n in range(5000)]
    workload.seed(db_url, app, ids)

    run = orchestra.run(
        procs, app, db_url, "--exit-when-idle", "--max-actors", "4", "--concurrency", "16"
    )
    killed: list[int] = []
    rng = random.Random(7)
    while run.alive:
        time.sleep(1.0)  # the cadence is the point here, not an event to wait for
        actors = orchestra.actor_pids(run.pid)
        if actors and workload.done_count(db_url) < len(ids) - 200:
            victim = rng.choice(actors)
            with contextlib.suppress(ProcessLookupError):  # it may just have exited
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
    assert run.wait(timeout=5) == 0, run.describe()

    assert len(killed) >= 3, f"only {len(killed)} kills: the run was too short to mean much"
    _done_once(db_url, ids)
    rows = workload.jobs(db_url)
    assert {r.status for r in rows.values()} == {"done"}
    exits = {
        e.get("actor_pid"): e.get("reason")
        for e in orchestra.events(here)
        if e.hook == "trawl_actor_exited"
    }
    assert all(exits.get(pid) == "crashed" for pid in killed), exits


# Every claim's COMMIT sleeps at the server while the table `slow` has a row: an actor
# killed meanwhile leaves a claim that lands only after the orchestrator reaped it.
SLOW_CLAIM_COMMIT = """
CREATE TABLE slow (seconds float NOT NULL);
CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('test.slept', true) IS DISTINCT FROM '1' THEN
        PERFORM set_config('test.slept', '1', true);
        PERFORM pg_sleep(seconds) FROM slow;
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER slow_claim AFTER UPDATE ON jobs DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.status = 'running' AND OLD.status <> 'running')
    EXECUTE FUNCTION slow_commit();
INSERT INTO slow VALUES (3);
"""

SLOW_APP = """
@app.task(tags=["t"], timeout="10m", actor=trawl.Actor(max_actors=1))
async def work(ctx):
    return None
"""


@pytest.mark.postgres
def test_a_claim_that_commits_after_its_actor_was_killed_is_settled_too(
    pg_url: str, tmp_path: Path, procs: Procs
) -> None:
    """PostgreSQL finishes a COMMIT whose client was killed while waiting for it. The
    orchestrator settles the dead actor's jobs at once, and again once the actor's session
    has gone: jobs leased by a dead actor are neither left to their 10-minute lease nor
    mistaken for "nothing is due" by --exit-when-idle."""
    app = workload.write_app(tmp_path / "app", SLOW_APP)
    ids = [f"item:{n:03d}" for n in range(200)]
    workload.seed(pg_url, app, ids)
    dsn = sa.make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SLOW_CLAIM_COMMIT)
        run = orchestra.run(procs, app, pg_url, "--exit-when-idle", "--concurrency", "8")

        def committing() -> list[int]:
            return [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event = 'PgSleep' AND query ILIKE 'commit%'"
                )
            ]

        wait_for(lambda: bool(committing()), "an actor's claim to be committing", 60)
        [victim] = orchestra.actor_pids(run.pid)
        os.kill(victim, signal.SIGKILL)
        conn.execute("DELETE FROM slow")  # the claims after this one commit at once
        assert committing(), "the claim's commit ended before its actor was killed"

    assert run.wait(timeout=120) == 0, run.describe()
    _done_once(pg_url, ids)
    assert {r.status for r in workload.jobs(pg_url).values()} == {"done"}


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


OLD_APP = """
@app.task(tags=["t"])
async def keep(ctx):
    return None

@app.task(tags=["t"])
async def gone(ctx):
    return None
"""

# The same app after `gone` was deleted from the code; `keep` takes a while, so the
# orchestrator ticks many times while gone's jobs are due.
NEW_APP = """
@app.task(tags=["t"], actor=trawl.Actor(concurrency=2))
async def keep(ctx):
    await asyncio.sleep(0.1)
    return None
"""


def test_due_jobs_of_a_task_removed_from_the_code_are_warned_about_once(
    sqlite_url: str, tmp_path: Path, procs: Procs
) -> None:
    old = workload.write_app(tmp_path / "old", OLD_APP)
    ids = [f"item:{n}" for n in range(20)]
    workload.seed(sqlite_url, old, ids)
    new = workload.write_app(tmp_path / "new", NEW_APP)

    started = time.monotonic()
    run = orchestra.run(procs, new, sqlite_url, "--exit-when-idle")
    assert run.wait(timeout=60) == 0, run.describe()
    assert time.monotonic() - started > 1.0, "too short a run to have ticked many times"

    warnings = [line for line in run.stderr().splitlines() if "orphaned task" in line]
    assert len(warnings) == 1, run.stderr()
    assert "orphaned task gone: 20 due jobs" in warnings[0]
    assert "keep" not in warnings[0]

    status = procs.trawl("--db", sqlite_url, "status", "--app", new, "--json")
    assert status.wait(timeout=30) == 0, status.describe()
    rows = {row["task"]: row for row in json.loads(status.stdout())["tasks"]}
    assert (rows["gone"]["orphaned"], rows["gone"]["due_now"]) == (True, 20)
    assert (rows["keep"]["orphaned"], rows["keep"]["counts"]["done"]) == (False, 20)
    table = procs.trawl("--db", sqlite_url, "status", "--app", new)
    assert table.wait(timeout=30) == 0, table.describe()
    assert "(orpha" in table.stdout()  # under "gone": the name wraps in 80 columns


# Every hook fires in this run: item:a's effects touch items and expire item:d's job,
# item:b raises, item:c defers, item:d skips, item:s loses its lease to a "thief" before it
# commits, and item:e never finishes: the test stops the orchestrator, which releases it.
HOOKS_APP = """
from sqlalchemy import text
from trawl.store.store import Store


@app.task(
    tags=["t"], retries=0, actor=trawl.Actor(max_actors=1, concurrency=1, linger=30)
)
async def work(ctx):
    if ctx.id == "item:a":
        ctx.create_item("item:x1")
        ctx.create_item("item:x2")
        ctx.update_data(lambda old: {**old, "seen": True})
        ctx.merge_item("item:x1", lambda into, merged: {**merged, **into}, from_="item:x2")
        ctx.rename_item("item:x1b", from_="item:x1")
        ctx.delete_item("item:x1b")
        ctx.expire(id="item:d")
    elif ctx.id == "item:b":
        raise RuntimeError("boom")
    elif ctx.id == "item:c":
        ctx.defer(time.time() + 3600)
    elif ctx.id == "item:d":
        ctx.skip()
    elif ctx.id == "item:s":
        with Store((HERE / "db_url").read_text()) as store, store.db.write():
            store.db.execute(text(
                "UPDATE jobs SET attempt = attempt + 1, owner = 'thief', due_at = 4e9"
                " WHERE item_id = 'item:s'"
            ))
    elif ctx.id == "item:e":
        (HERE / "e-started").touch()
        await asyncio.sleep(3600)
    return {"ok": True}
"""


def test_a_plugin_sees_every_hook_in_order(sqlite_url: str, tmp_path: Path, procs: Procs) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, HOOKS_APP + orchestra.RECORDER)
    (here / "db_url").write_text(sqlite_url)
    order = ["a", "b", "c", "d", "s", "e"]
    workload.seed(
        sqlite_url,
        app,
        [f"item:{x}" for x in order],
        niceness={f"item:{x}": n for n, x in enumerate(order)},
    )

    run = orchestra.run(procs, app, sqlite_url, "--grace", "0.5")
    wait_for(lambda: (here / "e-started").exists(), "item:e to start")
    wait_for(
        lambda: "trawl_orchestrator_idle" in orchestra.hooks(orchestra.events(here)),
        "the orchestrator to see nothing due while item:e runs",
    )
    run.send(signal.SIGTERM)
    assert run.wait(timeout=20) == 0, run.describe()

    events = orchestra.events(here)
    # A lease lost while its attempt still runs has a test of its own (below): here item:s
    # commits right after the theft, before any renewal could notice.
    expected = set(Plugins.names()) - {"trawl_job_lease_lost"}
    assert set(orchestra.hooks(events)) == expected, "some hook never fired"
    orchestrator = [e for e in events if e.pid == run.pid]
    (actor_pid,) = {e.pid for e in events} - {run.pid}
    actor = [e for e in events if e.pid == actor_pid]

    # The orchestrator: startup, ticks, the actor started, idle ticks, the actor's exit on
    # the way out, shutdown.
    steps = _collapse(orchestra.hooks(orchestrator))
    assert steps[:3] == [
        "trawl_orchestrator_startup",
        "trawl_orchestrator_tick",
        "trawl_actor_spawned",
    ]
    assert steps[-2:] == ["trawl_actor_exited", "trawl_orchestrator_shutdown"]
    assert set(steps[3:-2]) == {"trawl_orchestrator_tick", "trawl_orchestrator_idle"}
    exited = orchestrator[-2]
    assert (exited.get("actor_pid"), exited.get("reason")) == (actor_pid, "stopped")

    # The actor: startup first, shutdown last; jobs start in niceness order; each job goes
    # claimed -> tick start -> (exception) -> tick end -> its transition, with the item
    # events its commit caused just before the transition.
    assert (actor[0].hook, actor[-1].hook) == ("trawl_actor_startup", "trawl_actor_shutdown")
    starts = [e.get("item") for e in actor if e.hook == "trawl_actor_tick_start"]
    assert starts == [f"item:{x}" for x in order]
    ends = {
        "a": "job_done",
        "b": "job_failed",
        "c": "job_deferred",
        "d": "job_skipped",
        "s": "job_stale",
        "e": "job_released",
    }
    for x, end in ends.items():
        mine = [e.hook.removeprefix("trawl_") for e in actor if e.get("item") == f"item:{x}"]
        middle = ["actor_tick_exception"] if x == "b" else []
        assert mine == ["job_claimed", "actor_tick_start", *middle, "actor_tick_end", end], x
    done_a = next(n for n, e in enumerate(actor) if e.hook == "trawl_job_done")
    end_a = next(
        n
        for n, e in enumerate(actor)
        if e.hook == "trawl_actor_tick_end" and e.get("item") == "item:a"
    )
    caused = [
        (e.hook.removeprefix("trawl_"), e.get("item_id"))
        for e in actor[end_a:done_a]
        if e.hook.startswith(("trawl_item_", "trawl_job_expired"))
    ]
    assert caused == [
        ("item_created", "item:x1"),
        ("item_created", "item:x2"),
        ("item_updated", "item:a"),
        ("item_updated", "item:x1"),
        ("item_deleted", "item:x2"),
        ("item_merged", "item:x1"),
        ("item_renamed", "item:x1b"),
        ("item_deleted", "item:x1b"),
        ("job_expired", "item:d"),
    ]
    assert next(e for e in actor if e.hook == "trawl_job_failed").get("error") == "boom"
    assert next(e for e in actor if e.hook == "trawl_item_merged").get("merged_id") == "item:x2"
    assert next(e for e in actor if e.hook == "trawl_item_renamed").get("old_id") == "item:x1"


# The attempt loses its lease to a "thief" and keeps running until the worker's next lease
# renewal notices (a 3 s timeout renews every second), then returns: its commit is stale.
LEASE_LOST_APP = """
from sqlalchemy import text
from trawl.store.store import Store

RECORD_HOOKS = {"trawl_job_lease_lost", "trawl_job_stale", "trawl_job_done"}


@app.task(tags=["t"], retries=0, timeout=3)
async def work(ctx):
    with Store((HERE / "db_url").read_text()) as store, store.db.write():
        store.db.execute(text(
            "UPDATE jobs SET attempt = attempt + 1, owner = 'thief', due_at = 4e9"
            " WHERE item_id = :item"
        ), {"item": ctx.id})
    events = HERE / "events.jsonl"
    for _ in range(100):
        if events.exists() and "lease_lost" in events.read_text():
            break
        await asyncio.sleep(0.1)
    return {"ok": True}
"""


def test_a_lease_lost_while_the_attempt_runs_fires_its_hook_and_the_commit_is_stale(
    sqlite_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, LEASE_LOST_APP + orchestra.RECORDER)
    (here / "db_url").write_text(sqlite_url)
    workload.seed(sqlite_url, app, ["item:s"])

    worker = procs.worker(app, sqlite_url, concurrency=1)
    wait_for(
        lambda: "trawl_job_stale" in orchestra.hooks(orchestra.events(here)),
        "item:s's commit to be found stale",
    )
    worker.send(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0, worker.describe()

    events = orchestra.events(here)
    assert orchestra.hooks(events) == ["trawl_job_lease_lost", "trawl_job_stale"]
    assert [(e.get("item"), e.get("attempt")) for e in events] == [("item:s", 1)] * 2
    job = workload.jobs(sqlite_url)["item:s"]
    assert (job.attempt, job.status) == (2, "running"), "the thief's lease stands"


def _collapse(steps: list[str]) -> list[str]:
    """Runs of one hook (ticks, idle ticks) as one step."""
    return [s for n, s in enumerate(steps) if n == 0 or steps[n - 1] != s]


# One actor per persona (the spec's Chrome-per-persona example): each starts its "browser"
# once, every job runs in an actor of its own persona, and each actor stops its browser.
KEYED_APP = """
def start_browser(actor):
    (HERE / f"started-{actor.key}-{actor.pid}").touch()
    return {"browser_for": actor.key}


def stop_browser(actor, browser):
    (HERE / f"stopped-{actor.key}-{actor.pid}").write_text(browser["browser_for"])


@app.task(
    tags=["t"],
    actor=trawl.Actor(
        key=lambda item: item.data["persona"],
        max_actors=2,
        concurrency=2,
        on_startup=start_browser,
        on_shutdown=stop_browser,
    ),
)
async def shoot(ctx):
    actor = trawl.current_actor()
    assert actor.resource == {"browser_for": actor.key}
    await asyncio.sleep(0.02)
    return {"persona": ctx.data["persona"], "actor_key": actor.key, "pid": os.getpid()}
"""


def test_keyed_actors_run_only_their_key_with_their_own_resources(
    sqlite_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, KEYED_APP)
    personas = {f"item:{n:02d}": ("alice", "bob")[n % 2] for n in range(40)}
    with Store(sqlite_url) as store:
        store.register_tasks(d.info() for d in load_app(app).tasks.values())
        store.add_items(
            [NewItem(id=i, tags=(("t", None),), data={"persona": p}) for i, p in personas.items()]
        )

    run = orchestra.run(procs, app, sqlite_url, "--exit-when-idle")
    assert run.wait(timeout=60) == 0, run.describe()

    _done_once(sqlite_url, list(personas))
    with Store(sqlite_url) as store:
        results = {i: store.get_metadata("shoot", i) for i in personas}
    for item, result in results.items():
        assert result is not None
        assert result["actor_key"] == result["persona"] == personas[item], item
    pids = {(r["persona"], r["pid"]) for r in results.values() if r}
    assert {persona for persona, _ in pids} == {"alice", "bob"}
    started = sorted(p.name for p in here.glob("started-*"))
    stopped = sorted(p.name.replace("stopped", "started") for p in here.glob("stopped-*"))
    assert started == stopped, "every actor that started a browser stopped it"
    assert {(name.split("-")[1], int(name.split("-")[2])) for name in started} >= pids


# item:slow-N never finish by themselves; the quick ones do.
STOP_APP = """
@app.task(tags=["t"], timeout="60s", actor=trawl.Actor(concurrency=4))
async def work(ctx):
    start = time.time()
    if ctx.id.startswith("item:slow"):
        (HERE / ctx.id.replace(":", "-")).touch()
        await asyncio.sleep(3600)
    record(ctx.id, os.getpid(), ctx.attempt, start, time.time())
    return None
"""


def test_sigterm_stops_the_actors_gracefully_and_hands_unfinished_work_back(
    db_url: str, tmp_path: Path, procs: Procs
) -> None:
    here = tmp_path / "app"
    app = workload.write_app(here, STOP_APP)
    slow = ["item:slow-1", "item:slow-2"]
    quick = [f"item:quick-{n}" for n in range(10)]
    workload.seed(db_url, app, [*slow, *quick], niceness=dict.fromkeys(slow, -1))
    run = orchestra.run(procs, app, db_url, "--grace", "1")
    wait_for(lambda: all((here / s.replace(":", "-")).exists() for s in slow), "slow jobs")
    wait_for(lambda: workload.done_count(db_url) == len(quick), "the quick jobs")
    actors = orchestra.actor_pids(run.pid)
    assert actors

    signalled, signalled_wall = time.monotonic(), time.time()
    run.send(signal.SIGTERM)
    assert run.wait(timeout=20) == 0, run.describe()
    took = time.monotonic() - signalled
    assert 1.0 <= took <= 6.0, f"stopping took {took:.2f}s with --grace 1"
    assert not any(orchestra.alive(pid) for pid in actors)
    assert "Traceback" not in run.stderr()

    rows = workload.jobs(db_url)
    for item in slow:
        assert (rows[item].status, rows[item].attempt, rows[item].owner) == ("queued", 1, None)
        assert rows[item].due_at is not None
        assert signalled_wall <= rows[item].due_at <= time.time(), "released: due at once"
    entries = workload.journal(db_url)
    assert workload.kinds_by_item(entries, "job.released") == Counter(dict.fromkeys(slow, 1))
    _done_once(db_url, quick)
