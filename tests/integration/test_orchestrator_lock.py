"""One orchestrator per database per machine: the lock refuses a second holder, names the
first, and is taken over once its holder is gone, however it died."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import wait_for
from trawl.runtime.lock import OrchestratorLock, OrchestratorRunning, lock_path
from trawl.store.url import collection_id

HOLD = """
import sys, time
from trawl.runtime.lock import OrchestratorLock
OrchestratorLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(3600)
"""


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "run"
    monkeypatch.setenv("TRAWL_RUNTIME_DIR", str(directory))
    return directory


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    with OrchestratorLock(url):
        with pytest.raises(OrchestratorRunning, match=rf"\(pid {os.getpid()}\)"):
            OrchestratorLock(url).acquire()
        OrchestratorLock(f"sqlite:///{tmp_path}/b.db").acquire()  # another collection
    with OrchestratorLock(url):  # released
        pass


def test_the_lock_of_a_killed_holder_is_taken_over(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OrchestratorRunning, match=rf"\(pid {holder.pid}\)"):
            OrchestratorLock(url).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    finally:
        holder.kill()
        holder.wait()
    lock = wait_for(lambda: _try(url), "the lock to be free")
    assert lock_path(url).read_text().split("\n")[0] == str(os.getpid())
    lock.release()


def _try(url: str) -> OrchestratorLock | None:
    lock = OrchestratorLock(url)
    try:
        lock.acquire()
    except OrchestratorRunning:
        return None
    return lock


def test_every_spelling_of_one_database_is_one_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert collection_id("sqlite:///a.db") == collection_id(f"sqlite:///{tmp_path}/a.db")
    assert collection_id("sqlite:///a.db") != collection_id("sqlite:///b.db")
    assert collection_id("postgresql://u:secret@db/x") == collection_id("postgres://u@db:5432/x")
    assert "secret" not in collection_id("postgresql://u:secret@db/x")
    assert collection_id("postgresql://u@db/x") != collection_id("postgresql://u@db/y")
