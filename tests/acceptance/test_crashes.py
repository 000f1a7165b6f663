"""Jobs that crash their worker: every lapsed lease is a lost attempt, counted against the
job's retries, until the job is failed and `trawl failures` says why."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import trawl_command

pytestmark = [pytest.mark.slow, pytest.mark.timing]

APP = """
import os
import trawl

app = trawl.App()


@app.task(tags=["poison"], timeout="1s", retries=2, backoff="0.05s")
def poison(ctx: trawl.Context) -> None:
    os._exit(3)  # as a segfault or the OOM killer would: no exception, no commit


@app.task(tags=["fine"], timeout="1s", retries=5, backoff="0.05s")
def fine(ctx: trawl.Context) -> dict:
    return {"ok": True}
"""


def trawl(tmp: Path, url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRAWL_DB"}
    done = subprocess.run(
        [*trawl_command(), "--db", url, *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def job(tmp: Path, url: str, item: str, task: str) -> dict[str, Any]:
    shown = json.loads(trawl(tmp, url, "show", item, "--json").stdout)
    found: dict[str, Any] = next(j for j in shown["jobs"] if j["task"] == task)
    return found


def test_a_task_that_kills_its_worker_fails_after_its_retries(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "app.py").write_text(APP)
    trawl(tmp_path, db_url, "add", "sku:bad", "--tag", "poison")
    trawl(tmp_path, db_url, "add", "sku:good", "--tag", "fine")
    runs = []  # each worker run dies on the poison job, or sweeps it as lost
    while not runs or (state := job(tmp_path, db_url, "sku:bad", "poison"))["due_at"]:
        assert len(runs) < 8, f"still not failed after 8 worker runs: {runs[-1].stderr}"
        if runs:  # a worker started before the dead one's lease lapses finds nothing due
            time.sleep(max(0.0, state["due_at_epoch"] - time.time()) + 0.05)
        runs.append(
            trawl(tmp_path, db_url, "worker", "app.py:app", "--exit-when-idle", check=False)
        )
    bad = job(tmp_path, db_url, "sku:bad", "poison")
    assert bad["status"] == "failed"
    assert bad["due_at"] is None  # retries exhausted: nothing more until someone retries it
    assert bad["fail_count"] == 3  # the first attempt and its two retries
    # A job that shared a worker with the poison is lost with it, and retried: it ends done.
    trawl(tmp_path, db_url, "worker", "app.py:app", "--exit-when-idle")
    assert job(tmp_path, db_url, "sku:good", "fine")["status"] == "done"
    failures = json.loads(trawl(tmp_path, db_url, "failures", "--json").stdout)["failures"]
    lost = [f for f in failures if f["item_id"] == "sku:bad"]
    assert [f["error_type"] for f in lost] == ["lost"] * 3
    assert sorted(f["attempt"] for f in lost) == [1, 2, 3]
    assert all("ended without a commit" in f["message"] for f in lost)
    assert all("worker " in f["message"] for f in lost)
