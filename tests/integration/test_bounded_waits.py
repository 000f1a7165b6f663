"""A writer that is stopped (SIGSTOP) while it holds the write lock blocks the others for a
bounded time: on SQLite they get a clear error at the lock's deadline; on PostgreSQL the
server ends the idle transaction and they go on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.integration.helpers import claim, item, success, task
from trawl.engine import usercode
from trawl.engine.commit import commit
from trawl.model import effects as fx
from trawl.model.errors import DatabaseUnavailable
from trawl.store.sql import q
from trawl.store.store import Store

HOLDER = """
import sys, time
from trawl.store.store import Store
from trawl.store.sql import q
store = Store(sys.argv[1])
with store.db.write():
    if not store.is_sqlite:
        store.db.execute(q("SELECT pg_advisory_xact_lock(7470)"))
    store.db.execute(q("UPDATE tasks SET paused = paused"))
    print("held", flush=True)
    time.sleep(600)
"""


def _hold_and_stop(url: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), url], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    os.kill(proc.pid, signal.SIGSTOP)
    return proc


def _end(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    os.kill(proc.pid, signal.SIGCONT)
    proc.wait(10)


def test_sqlite_writers_get_a_clear_error_at_the_lock_deadline(sqlite_url: str) -> None:
    holder = _hold_and_stop(sqlite_url)
    try:
        started = time.monotonic()
        late = pytest.raises(DatabaseUnavailable, match="waited 1s for SQLite's write lock")
        with Store(sqlite_url + "?lock_timeout=1") as store, late:
            store.add_items([item("sku:1", "product")])
        assert 0.9 <= time.monotonic() - started < 10
    finally:
        _end(holder)
    with Store(sqlite_url) as store:  # the lock dies with its holder
        assert store.add_items([item("sku:1", "product")]) == ["sku:1"]


@pytest.mark.postgres
def test_postgres_sessions_bound_lock_waits_and_idle_transactions(pg_url: str) -> None:
    with Store(pg_url) as store, store.db.read():
        assert store.db.execute(q("SHOW lock_timeout")).scalar() == "30s"
        assert store.db.execute(q("SHOW idle_in_transaction_session_timeout")).scalar() == "1min"


@pytest.mark.postgres
def test_a_stopped_postgres_writer_is_cut_off_and_the_others_go_on(pg_url: str) -> None:
    options = "?options=-c%20idle_in_transaction_session_timeout%3D2s"
    holder = _hold_and_stop(pg_url + options)
    try:
        started = time.monotonic()
        with Store(pg_url) as store, store.db.write():
            store.db.execute(q("SELECT pg_advisory_xact_lock(7470)"))
            store.db.execute(q("UPDATE tasks SET paused = paused"))
        waited = time.monotonic() - started
        assert 1.5 <= waited < 15, waited
    finally:
        _end(holder)


@pytest.mark.postgres
def test_a_renewal_skips_a_lease_a_long_commit_has_locked(pg_url: str) -> None:
    with Store(pg_url) as store:
        store.register_tasks([task()])
        store.add_items([item("sku:1", "product"), item("sku:2", "product")])
        first, second = claim(store, limit=2)
        with Store(pg_url) as committing, committing.db.write():
            committing.db.execute(q(f"SELECT id FROM jobs WHERE id = {first.job_id} FOR UPDATE"))
            started = time.monotonic()
            kept = store.renew([(j.job_id, j.attempt, 60.0) for j in (first, second)])
            assert time.monotonic() - started < 5  # not held up until the commit ends
        assert kept == {second.job_id}


def test_a_hanging_update_callback_is_given_up_and_the_lock_released(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usercode, "LIMIT", 0.3)
    release = threading.Event()

    def hang(old: dict[str, object]) -> dict[str, object]:
        release.wait(30)
        return old

    with Store(db_url) as store:
        store.register_tasks([task()])
        store.add_items([item("sku:1", "product")])
        (job,) = claim(store)
        started = time.monotonic()
        stuck = success(job, {"ok": True}, effects=(fx.UpdateData(id="sku:1", fn=hang),))
        report = commit(store, [stuck])
        assert time.monotonic() - started < 5
        release.set()
        assert "update_data function ran longer than 0.3s" in report.effect_failures[job.job_id]
        (failed,) = store.failures(task="price")
        assert failed.error_type == "UserCodeTimeout"
        assert store.add_items([item("sku:2", "product")]) == ["sku:2"]  # the lock is free
