"""``trawl schedule``: recurring commands run by real workers, through the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import trawl_command, wait_for
from trawl.model.records import NewItem
from trawl.runtime import recurring
from trawl.store.store import Store

pytestmark = pytest.mark.slow

APP = """
import trawl

app = trawl.App()


@app.task(tags=["page"])
def title(ctx: trawl.Context) -> dict:
    return {"title": ctx.id}
"""


class Cli:
    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp = tmp
        self.env = os.environ | {"TRAWL_DB": url, "TRAWL_RUNTIME_DIR": str(tmp / "run")}
        (tmp / "app.py").write_text(APP)
        self.pids: list[int] = []

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*trawl_command(), *args],
            cwd=self.tmp,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if ok:
            assert done.returncode == 0, done.stderr
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)

    def work(self) -> None:
        self("worker", "app.py:app", "--exit-when-idle")

    def fire(self, name: str) -> dict[str, Any]:
        self("schedule", "run-now", name)
        self.work()
        shown: dict[str, Any] = self.json("schedule", "show", name)
        return shown


@pytest.fixture
def cli(tmp_path: Path, sqlite_url: str) -> Iterator[Cli]:
    runner = Cli(tmp_path, sqlite_url)
    yield runner
    for pid in runner.pids:  # detached crawls lead sessions of their own
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def test_run_now_runs_the_action_once_and_rearms_on_the_cron(cli: Cli) -> None:
    added = cli(
        "schedule", "add", "tick", "--cron", "0 3 * * *", "--", "add", "url:a", "--tag", "t"
    )
    assert "`trawl add url:a --tag t` next at" in added.stdout
    shown = cli.fire("tick")
    assert shown["last_outcome"] == "ran"
    assert shown["coalesced"] == 0
    assert cli.json("show", "url:a")["tags"] == {"t": None}
    job = cli.json("show", "schedule:tick")["jobs"][0]
    assert job["status"] == "done"
    assert shown["next_at"].endswith("T03:00:00.000Z")
    # Due again at the next 03:00: the TTL counts from the commit, so a moment after it.
    late = job["due_at_epoch"] - datetime.fromisoformat(shown["next_at"]).timestamp()
    assert 0 <= late < 30


def test_nothing_runs_before_the_first_fire(cli: Cli) -> None:
    cli("schedule", "add", "later", "--cron", "0 3 1 1 *", "--", "add", "url:b")
    cli.work()
    assert cli.json("schedule", "show", "later")["last_outcome"] == "waiting"
    assert cli("show", "url:b", ok=False).returncode == 1


def test_missed_runs_are_coalesced_into_one(cli: Cli, sqlite_url: str) -> None:
    an_hour_ago = time.time() - 3600
    spec = recurring.make("minutely", "* * * * *", "UTC", ("add", "url:c"), an_hour_ago)
    with Store(sqlite_url) as store:
        store.add_items(
            [NewItem(id=spec.item_id, tags=((recurring.TAG, None),), data=spec.to_data())]
        )
    cli.work()
    shown = cli.json("schedule", "show", "minutely")
    assert shown["last_outcome"] == "ran"
    assert 59 <= shown["coalesced"] <= 60  # 60 or 61 fires in the hour: one run for them all
    journal = cli("journal", "--json").stdout.splitlines()
    created = [e for e in map(json.loads, journal) if e["kind"] == "item.created"]
    assert [e["item_id"] for e in created].count("url:c") == 1
    assert any("missed runs coalesced" in json.dumps(e) for e in map(json.loads, journal))


def test_pause_resume_delete(cli: Cli) -> None:
    cli("schedule", "add", "p", "--cron", "0 3 * * *", "--", "add", "url:p")
    cli("schedule", "pause", "p")
    assert cli.fire("p")["last_outcome"] == "paused"
    assert cli("show", "url:p", ok=False).returncode == 1
    cli("schedule", "resume", "p")
    assert cli.fire("p")["last_outcome"] == "ran"
    listed = cli.json("schedule", "list")["schedules"]
    assert [s["name"] for s in listed] == ["p"]
    cli("schedule", "delete", "p")
    gone = cli("schedule", "show", "p", ok=False)
    assert gone.returncode == 1
    assert "no schedule is named 'p'" in gone.stderr


def test_a_failing_action_is_recorded_and_keeps_the_cadence(cli: Cli) -> None:
    cli("schedule", "add", "f", "--cron", "0 3 * * *", "--", "expire", "--task", "no-such-task")
    shown = cli.fire("f")
    assert shown["last_outcome"] == "failed"
    assert "unknown task 'no-such-task'" in shown["error"]
    assert cli.json("show", "schedule:f")["jobs"][0]["status"] == "done"


def test_bad_input_is_refused_before_anything_is_written(cli: Cli) -> None:
    bad = cli("schedule", "add", "x", "--cron", "0 25 * * *", "--", "add", "url:x", ok=False)
    assert bad.returncode == 1
    assert "bad cron expression '0 25 * * *'" in bad.stderr
    assert cli.json("schedule", "list")["schedules"] == []
    cli("schedule", "add", "x", "--cron", "0 3 * * *", "--", "add", "url:x")
    again = cli("schedule", "add", "x", "--cron", "0 4 * * *", "--", "add", "url:x", ok=False)
    assert "schedule 'x' exists" in again.stderr
    assert cli("schedule", "run-now", "nope", ok=False).returncode == 1


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers: a crawl of it stays running."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_a_fire_while_its_crawl_still_runs_is_skipped(cli: Cli, silent_server: str) -> None:
    cli(
        "schedule",
        "add",
        "c",
        "--cron",
        "0 3 * * *",
        "--",
        "crawl",
        silent_server,
        "--depth",
        "0",
        "--timeout",
        "120s",
        # The lease is the fetch task's timeout too: a short one would fail the page's
        # attempts one after another and, on a slow machine, finish the crawl (its page
        # failed for good) before the second fire looks at it.
        "--lease",
        "120s",
        "--no-robots",
    )
    first = cli.fire("c")
    assert first["last_outcome"] == "ran"
    crawl_id = first["crawl"]
    cli.pids += _crawl_pids(cli)
    assert cli.json("crawl", "show", str(crawl_id))["status"] in ("ACTIVE", "DRAINING")
    second = cli.fire("c")
    assert second["last_outcome"] == "skipped"
    assert second["crawl"] == crawl_id
    cli("crawl", "abort", str(crawl_id))
    for pid in cli.pids:  # an aborted crawl is not running, whatever its page in flight
        # (on a busy machine the worker may have seen the abort and exited already)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    wait_for(
        lambda: cli.json("crawl", "show", str(crawl_id))["status"] == "ABORTED",
        "the aborted crawl to stop",
    )
    third = cli.fire("c")
    assert third["last_outcome"] == "ran"
    assert third["crawl"] != crawl_id
    cli.pids += _crawl_pids(cli)


def _crawl_pids(cli: Cli) -> list[int]:
    # The schedule keeps the crawl's id, not its pid: find this test's detached crawls by
    # the runtime directory in their environment.
    found = subprocess.run(["pgrep", "-f", "trawl crawl resume"], capture_output=True, text=True)
    mine = []
    for pid in found.stdout.split():
        environ = Path(f"/proc/{pid}/environ")
        try:
            if str(cli.tmp).encode() in environ.read_bytes():
                mine.append(int(pid))
        except OSError:
            continue
    return mine
