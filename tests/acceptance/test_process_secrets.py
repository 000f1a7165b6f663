"""No database password shows in any child process's command line (`ps` shows argv to
every user on the machine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import orchestra, workload
from tests.support.procs import Procs, running, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

HOLD_APP = """
@app.task(tags=["t"], timeout="60s")
async def hold(ctx):
    while not (HERE / "release").exists():
        await asyncio.sleep(0.05)
"""


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def test_actors_get_the_database_url_through_their_environment(
    tmp_path: Path, pg_url: str, procs: Procs
) -> None:
    # Trust authentication takes any password: this one must appear in no child's argv.
    url = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cr3t-pw@")
    assert "s3cr3t-pw" in url
    here = tmp_path / "app"
    app = workload.write_app(here, HOLD_APP)
    workload.seed(url, app, ["item:1"])
    orchestrator = orchestra.run(procs, app, url)
    actors = wait_for(lambda: orchestra.actor_pids(orchestrator.pid), "an actor to start")
    for pid in actors:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"s3cr3t-pw" not in argv
        assert b"--db" not in argv
    (here / "release").touch()
    wait_for(lambda: workload.done_count(url) == 1, "the job to finish")
