"""`trawl crawl --processes N`: N processes fetch one crawl's pages from one frontier, the
crawl comes out exact, and the helpers never outlive the command, however it ends."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import procs as procs_support
from tests.support.procs import Proc, Procs, descendants, wait_for
from trawl.crawl import operations
from trawl.demo.httpd import Script, SiteServer
from trawl.demo.site import random_graph
from trawl.store.sql import q
from trawl.store.store import Store

ROOT = ("main", "/")


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from procs_support.running(tmp_path / "logs")


def _owners(url: str) -> set[str]:
    """The processes holding the crawl's pages now (a job's owner is host:pid:token)."""
    with Store(url) as store:
        rows = store.db.execute(q("SELECT DISTINCT owner FROM jobs WHERE status = 'running'"))
        return {row.owner.split(":")[1] for row in rows if row.owner}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _crawl(procs: Procs, url: str, root: str, *extra: str) -> Proc:
    return procs.trawl(
        "--db", url, "crawl", root, "--depth", "9", "--concurrency", "4", "--no-progress",
        *extra,
    )  # fmt: skip


def test_three_processes_share_the_crawl_and_finish_it_exactly(procs: Procs, db_url: str) -> None:
    """On SQLite too: its processes take turns at the one writer, and the crawl still comes
    out exact."""
    # Slow enough (about 15 s at 4 requests at once) that helpers started on a loaded
    # machine still find pages to fetch.
    site = random_graph(300, seed=11, out_degree=4)
    with SiteServer(site, Script(latency=0.2), hosts=3) as server:
        crawl = _crawl(procs, db_url, server.url(ROOT), "--processes", "3")
        seen: set[str] = set()

        def everyone_working() -> bool:
            seen.update(_owners(db_url))
            return len(seen) >= 3 or not crawl.alive

        wait_for(everyone_working, "three processes holding pages", timeout=60)
        helpers = descendants(crawl.pid)
        assert crawl.wait(120) == 0, crawl.describe()
    assert len(seen) == 3, f"pages held by processes {seen}"
    assert str(crawl.pid) in seen
    with Store(db_url) as store:
        progress = operations.progress(store, store.crawls.all()[0].id)
    assert progress.status == operations.FINISHED
    assert (progress.done, progress.failed) == (len(site.truth(9)), 0)
    assert not [pid for pid in helpers if _alive(pid)], "a helper outlived the command"


@pytest.mark.postgres
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_the_helpers_stop_with_the_command(procs: Procs, pg_url: str, how: signal.Signals) -> None:
    site = random_graph(1000, seed=5, out_degree=4)  # a minute's work at least: it outlasts
    with SiteServer(site, Script(latency=0.3), hosts=2) as server:  # the wait below
        crawl = _crawl(procs, pg_url, server.url(ROOT), "--processes", "2")
        wait_for(lambda: len(_owners(pg_url)) >= 2, "both processes holding pages", timeout=60)
        helpers = descendants(crawl.pid)
        assert helpers
        crawl.send(how)
        crawl.wait(60)
        wait_for(lambda: not [p for p in helpers if _alive(p)], "the helpers to exit", 15)


@pytest.mark.postgres
def test_a_detached_crawl_keeps_its_processes(procs: Procs, pg_url: str) -> None:
    site = random_graph(300, seed=11, out_degree=4)
    with SiteServer(site, Script(latency=0.2), hosts=3) as server:
        command = _crawl(procs, pg_url, server.url(ROOT), "--processes", "2", "--detach")
        assert command.wait(60) == 0, command.describe()
        detached = json.loads(command.stdout())
        seen: set[str] = set()

        def finished() -> bool:
            seen.update(_owners(pg_url))
            return not _alive(detached["pid"])

        wait_for(finished, "the detached crawl to finish", timeout=120)
    assert len(seen) == 2, f"pages held by processes {seen}"
    with Store(pg_url) as store:
        progress = operations.progress(store, detached["id"])
    assert progress.status == operations.FINISHED
    assert (progress.done, progress.failed) == (len(site.truth(9)), 0)
