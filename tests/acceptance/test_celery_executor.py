"""Celery as the executor, against the real RabbitMQ with real Celery workers (prefork).

2,000 jobs fed with a cap of 50: the broker queue never holds more than 50 (sampled every
few milliseconds), every job is committed exactly once, and one Celery worker killed with
SIGKILL (with its pool) mid-run loses nothing: its jobs come back when their leases lapse.

RabbitMQ is the machine's own (or TRAWL_TEST_AMQP); without it these tests skip saying what
to start, except under CI=true, where they fail.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.integration.helpers import item
from tests.live.services import AMQP, need
from tests.support.procs import Proc, Procs, descendants, running, wait_for
from trawl.store.store import Store

JOBS = 2000
CAP = 50

APP = """
import os, time
import trawl
from celery import Celery
from trawl.celery import bind

app = trawl.App()

@app.task(tags=["repo"], executor="celery", queue=os.environ["TEST_QUEUE"], timeout="3s",
          retries=5, backoff="0.2s")
def load(ctx):
    # One item in a hundred takes 1 s: the test kills a worker while it runs one of those.
    time.sleep(1.0 if ctx.data["n"] % 100 == 7 else 0.05)
    return {"n": ctx.data["n"], "pid": os.getpid()}

@app.task(tags=["repo"], timeout="10s")
def local_check(ctx):
    return {"ran": "here"}

celery = Celery("fixture", broker=os.environ["TEST_AMQP"])
celery.conf.worker_hijack_root_logger = False
celery.conf.worker_prefetch_multiplier = 1  # a prefetched message counts against the cap
bind(app, celery)
"""


@pytest.fixture
def amqp() -> str:
    return need(AMQP, 5672, "RabbitMQ")


@pytest.fixture
def queue(amqp: str) -> Iterator[str]:
    """A queue of this test's own (others may share the broker); deleted afterwards."""
    name = f"trawl.test.{secrets.token_hex(4)}"
    yield name
    from kombu import Connection

    with Connection(amqp) as conn, contextlib.suppress(Exception):
        conn.default_channel.queue_delete(name)


@pytest.fixture
def procs(tmp_path: Path, amqp: str, queue: str) -> Iterator[Procs]:
    (tmp_path / "fixture_app.py").write_text(APP)
    for procs in running(tmp_path / "procs"):
        procs.env |= {
            "PYTHONPATH": str(tmp_path),
            "TEST_QUEUE": queue,
            "TEST_AMQP": amqp,
        }
        yield procs


def celery_worker(procs: Procs, db: str, queue: str, name: str) -> Proc:
    """A Celery worker of the user's own, run as the user would, in a session of its own."""
    argv = [
        str(Path(sys.executable).with_name("celery")),
        "-A", "fixture_app:celery", "worker", "-Q", queue, "-P", "prefork", "-c", "2",
        "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
        "--loglevel", "WARNING",
    ]  # fmt: skip
    proc = Proc(name, argv, procs.logs, procs.env | {"TRAWL_DB": db})
    procs.started.append(proc)
    return proc


def feeder(procs: Procs, db: str, *extra: str) -> Proc:
    return procs.trawl(
        "--db", db, "feed", "celery", "fixture_app:app", "--max-queue", str(CAP),
        "--full-wait", "0.05s", "--splay", "0.05s", "--idle-wait", "1s", *extra,
        name="feeder",
    )  # fmt: skip


class QueueSampler(threading.Thread):
    """Reads the queue's length from the broker every few milliseconds."""

    def __init__(self, amqp: str, queue: str) -> None:
        super().__init__(daemon=True)
        self.amqp, self.queue = amqp, queue
        self.samples: list[int] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        from kombu import Connection

        with Connection(self.amqp) as conn:
            channel = conn.default_channel
            while not self.stopped.is_set():
                with contextlib.suppress(Exception):
                    _, count, _ = channel.queue_declare(queue=self.queue, passive=True)
                    self.samples.append(int(count))
                time.sleep(0.005)


def done(store: Store) -> int:
    with store.read():
        stmt = sa.text("SELECT count(*) FROM jobs WHERE task = 'load' AND status = 'done'")
        return int(store.db.execute(stmt).scalar() or 0)


def running_slow_on(store: Store, pids: list[int]) -> bool:
    """Whether one of *pids* (a Celery worker's pool) is running one of the slow attempts
    now. A kill of a worker seen running a 50 ms attempt could land after it committed (the
    read, then the kill, on a loaded machine), and then nothing was lost to test."""
    owners = {f"celery:{socket.gethostname()}:{pid}" for pid in pids}
    stmt = sa.text(
        "SELECT owner, item_id FROM jobs"
        " WHERE task = 'load' AND status = 'running' AND handoff = 'started'"
    )
    with store.read():
        rows = store.db.execute(stmt).all()
    return any(owner in owners and _slow(item_id) for owner, item_id in rows)


def _slow(item_id: str) -> bool:
    return int(item_id.split(":")[1]) % 100 == 7  # as the fixture app's load task says


def kill_group(proc: Proc) -> None:
    """SIGKILL a Celery worker and its pool, as a machine lost would."""
    children = descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.popen.wait()


@pytest.mark.slow
def test_2000_jobs_fed_with_a_cap_of_50_survive_a_killed_worker(
    procs: Procs, pg_url: str, amqp: str, queue: str
) -> None:
    with Store(pg_url) as store:
        store.add_items([item(f"repo:{n}", "repo", n=n) for n in range(JOBS)])
        sampler = QueueSampler(amqp, queue)
        sampler.start()
        feed = feeder(procs, pg_url)
        first = celery_worker(procs, pg_url, queue, "w1")
        second = celery_worker(procs, pg_url, queue, "w2")
        wait_for(lambda: done(store) >= 400, "400 jobs done", timeout=120, interval=0.05)
        pool = descendants(first.pid)
        wait_for(
            lambda: running_slow_on(store, pool), "w1 running a slow job", timeout=60, interval=0.05
        )
        kill_group(first)  # mid-run: one of its attempts is running
        killed_at = done(store)
        wait_for(lambda: done(store) >= JOBS, "every job done", timeout=240, interval=0.2)
        sampler.stopped.set()
        sampler.join()
        with store.read():
            journal = Counter(
                row.item_id
                for row in store.db.execute(
                    sa.text("SELECT item_id FROM journal WHERE kind = 'job.done' AND task = 'load'")
                )
            )
            lost = store.db.execute(
                sa.text("SELECT count(*) FROM failures WHERE task = 'load' AND error_type = 'lost'")
            ).scalar()
            local_running = store.db.execute(
                sa.text("SELECT count(*) FROM jobs WHERE task = 'local_check' AND attempt > 0")
            ).scalar()
        feed.send(signal.SIGTERM)
        assert feed.wait(30) == 0, feed.describe()
        assert second.alive, second.describe()
    print(
        f"queue samples: {len(sampler.samples)}, max {max(sampler.samples)}; killed worker at"
        f" {killed_at} done; {lost} attempts lost with it and retried"
    )
    assert len(sampler.samples) > 100
    assert max(sampler.samples) <= CAP
    assert max(sampler.samples) >= CAP * 0.8  # the feeder did keep the queue filled
    assert set(journal) == {f"repo:{n}" for n in range(JOBS)}
    assert set(journal.values()) == {1}  # committed exactly once each
    assert lost >= 1, "the kill landed while no attempt ran: nothing was tested"
    assert local_running == 0  # the feeder feeds only executor="celery" tasks


# -- what the command line refuses, with a message naming what is wrong ----------------------

NO_BIND = """
import trawl
app = trawl.App()

@app.task(tags=["repo"], executor="celery")
def load(ctx):
    return None
"""
NO_CELERY_TASK = """
import trawl
from celery import Celery
from trawl.celery import bind
app = trawl.App()

@app.task(tags=["repo"])
def parse(ctx):
    return None

bind(app, Celery("x", broker="memory://"))
"""


def run_cli(tmp_path: Path, app: str, *args: str, block_celery: bool = False) -> tuple[int, str]:
    import subprocess

    (tmp_path / "cli_app.py").write_text(app)
    prelude = "import sys; sys.modules['celery'] = None; " if block_celery else "import sys; "
    code = prelude + "from trawl.cli.main import main; sys.exit(main(sys.argv[1:]))"
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    done = subprocess.run(
        [sys.executable, "-c", code, "--db", db, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=os.environ | {"PYTHONPATH": str(tmp_path)},
        timeout=60,
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    ("app", "args", "block", "message"),
    [
        (NO_BIND, ["feed", "celery", "cli_app:app", "--max-queue", "5"], False,
         "cli_app:app binds no Celery app: call trawl.celery.bind(app, celery_app) in it"),
        (NO_CELERY_TASK, ["feed", "celery", "cli_app:app", "--max-queue", "5"], False,
         "the app declares no task with executor='celery': nothing to feed"),
        (NO_BIND, ["feed", "celery", "cli_app:app", "--max-queue", "5"], True,
         "Celery is not installed"),
        (NO_BIND, ["feed", "celery", "cli_app:app", "--max-queue", "0"], False,
         "Invalid value for '--max-queue'"),
        (NO_BIND, ["worker", "cli_app:app", "--tasks", "load"], False,
         "task 'load' runs on celery (executor='celery'): its workers run it; feed them"),
    ],
)  # fmt: skip
def test_the_command_line_says_what_is_wrong(
    tmp_path: Path, app: str, args: list[str], block: bool, message: str
) -> None:
    code, stderr = run_cli(tmp_path, app, *args, block_celery=block)
    assert code != 0
    assert message in " ".join(stderr.split()), stderr
