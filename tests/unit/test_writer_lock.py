"""SQLite writers queue on a file lock: taken at BEGIN, dropped at the end, never self-waited."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from trawl.store import writer_lock
from trawl.store.connection import Database


def test_a_second_writer_waits_for_the_first_to_commit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    first, second = Database(url), Database(url)
    with first.write() as conn:
        conn.exec_driver_sql("CREATE TABLE t (n INTEGER)")
    events: list[str] = []
    inside = threading.Event()

    def hold() -> None:
        with first.write() as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
            inside.set()
            time.sleep(0.3)
            events.append("first commits")

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait(5)
    probe = os.open(tmp_path / "q.db-lock", os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # the writer holds the file lock, not only SQLite's
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(probe)
    with second.write() as conn:
        events.append("second begins")
        conn.exec_driver_sql("INSERT INTO t VALUES (2)")
    holder.join()
    assert events == ["first commits", "second begins"]
    with second.read() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM t")).scalar() == 2
    first.close()
    second.close()


def test_a_thread_holding_the_lock_does_not_wait_for_itself(tmp_path: Path) -> None:
    one = writer_lock.WriterLock(str(tmp_path / "x.db"))
    two = writer_lock.WriterLock(str(tmp_path / "x.db"))
    one.acquire()
    two.acquire()  # would block forever on the flock; SQLite's busy timeout decides instead
    two.release()
    one.release()
    done = threading.Event()

    def other_thread() -> None:
        two.acquire()
        done.set()
        two.release()

    one.acquire()
    thread = threading.Thread(target=other_thread)
    thread.start()
    assert not done.wait(0.2), "another thread must wait for the holder"
    one.release()
    assert done.wait(5)
    thread.join()
    one.close()
    two.close()


def test_without_a_lock_file_writers_fall_back_to_sqlite_alone(tmp_path: Path) -> None:
    lock = writer_lock.WriterLock(str(tmp_path / "missing-dir" / "x.db"))
    lock.acquire()  # cannot create the file: no error, SQLite's own lock still applies
    lock.release()
    lock.close()
    assert writer_lock.for_database(":memory:") is None
    assert writer_lock.for_database(None) is None


def test_a_writer_killed_while_holding_the_lock_frees_it(tmp_path: Path) -> None:
    path = str(tmp_path / "k.db")
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from trawl.store.writer_lock import WriterLock;"
            "lock = WriterLock(sys.argv[1]); lock.acquire(); print('held', flush=True);"
            "time.sleep(60)",
            path,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        lock = writer_lock.WriterLock(path)
        got = threading.Event()
        thread = threading.Thread(target=lambda: (lock.acquire(), got.set()))
        thread.start()
        assert got.wait(5), "the dead writer's lock must be free"
        thread.join()
        lock.close()
    finally:
        child.kill()
        child.wait()
