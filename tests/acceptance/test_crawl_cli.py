"""`trawl crawl` and `trawl demo` as a user runs them: kill -9 half way and run the same
command again; abort and resume; edit rules with --ensure-ruleset; the offline demo."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import site_crawl, workload
from tests.support.procs import Procs, running, wait_for
from trawl.crawl import operations
from trawl.crawl.options import Options
from trawl.demo.httpd import Script, SiteServer
from trawl.demo.site import generate
from trawl.store import migrate
from trawl.store.store import Store

pytestmark = pytest.mark.slow


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "logs")


def _done(url: str) -> int:
    with Store(url) as store:
        if migrate.current(store.db) != migrate.head():
            return 0  # the command has not created the schema yet
        crawls = operations.all_crawls(store)
        return operations.progress(store, crawls[0].id).done if crawls else 0


def test_kill_9_half_way_then_the_same_command_resumes(procs: Procs, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'crawl.db'}"
    with SiteServer(generate(300), Script(latency=0.03)) as server:
        root = server.url(("main", "/"))
        argv = ["--db", db, "crawl", root, "--depth", "3", "--concurrency", "4"]
        argv += ["--lease", "3s", "--no-progress", "--warc", str(tmp_path / "w.warc.gz")]
        first = procs.trawl(*argv, name="first")
        truth = {server.url(k): d for k, d in server.site.truth(3).items()}
        wait_for(lambda: _done(db) >= len(truth) // 2, "half the pages", timeout=60)
        first.send(signal.SIGKILL)
        first.wait(10)
        killed_at = max(r.at for r in server.requests())
        second = procs.trawl(*argv, name="second")
        assert second.wait(90) == 0, second.describe()
        log = server.requests()
    assert "resuming crawl 1" in second.stderr()
    assert "FINISHED" in second.stdout()

    found = site_crawl.pages(db, 1)
    expected = {u: d for u, d in truth.items() if d <= 3 and "/private/" not in u}
    assert site_crawl.fetched(found) == expected, "a page was lost or fetched at a wrong depth"
    done = Counter(a["url"] for a in site_crawl.attempts(db, 1) if a["outcome"] == "done")
    assert set(done.values()) == {1}, "a page was committed twice"
    committed = workload.kinds_by_item(workload.journal(db), "job.done")
    assert set(committed.values()) == {1}
    # A page committed before the kill is not asked for again by the second run.
    first_run = {a["url"] for a in site_crawl.attempts(db, 1) if a["started_at"] < killed_at - 1}
    again = [r for r in log if r.at > killed_at and server.origin["main"] + r.path in first_run]
    assert not again, f"fetched again after its commit: {again[:3]}"


def test_abort_resume_and_rules_from_the_command_line(procs: Procs, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'crawl.db'}"
    with SiteServer(generate(60)) as server:
        root = server.url(("main", "/"))
        argv = ["--db", db, "crawl", root, "--depth", "2", "--concurrency", "1"]
        crawl = procs.trawl(*argv, "--delay", "0.2", "--no-progress", name="crawl")
        wait_for(lambda: _done(db) >= 3, "a few pages")
        assert procs.trawl("--db", db, "crawl", "abort", "1").wait(30) == 0
        assert crawl.wait(30) == 0, crawl.describe()
        assert "crawl 1 ABORTED" in crawl.stdout()
        listed = _json(procs, db, "crawl", "list", "--json")["crawls"]
        assert listed[0]["status"] == "ABORTED"
        assert listed[0]["pages"]["parked"] > 0

        rule = ["--db", db, "crawl", "rule", "add", "1", "--reject", "/page/"]
        assert procs.trawl(*rule, "--ensure-ruleset", "1").wait(30) == 0
        stale = procs.trawl(*rule, "--ensure-ruleset", "1", name="stale")
        assert stale.wait(30) == 1
        assert "at version 2, not 1" in stale.stderr()

        resumed = procs.trawl("--db", db, "crawl", "resume", "1", "--no-progress", name="resume")
        assert resumed.wait(60) == 0, resumed.describe()
    shown = _json(procs, db, "crawl", "show", "1", "--json")
    assert shown["status"] == "FINISHED"
    assert shown["ruleset"] == 2
    pages = _json(procs, db, "crawl", "pages", "1", "--json")["pages"]
    late = [p for p in pages if p["skip"] == "rule:2"]
    assert late, "pages claimed after the edit were skipped by it"
    assert all("/page/" in p["url"] for p in late)


def test_demo_crawls_the_generated_site_offline(procs: Procs, tmp_path: Path) -> None:
    demo = procs.trawl("demo", "--pages", "80", "--no-progress", "--dir", str(tmp_path / "d"))
    assert demo.wait(120) == 0, demo.describe()
    out = demo.stdout()
    assert "FINISHED" in out
    assert "0 wrong, 0 missed, 0 past the limit" in out
    assert "revisit" in out
    assert (tmp_path / "d" / "demo.warc.gz").stat().st_size > 5 << 20
    assert json.loads((tmp_path / "d" / "truth.json").read_text())


def _json(procs: Procs, db: str, *args: str) -> dict:  # type: ignore[type-arg]
    proc = procs.trawl("--db", db, *args)
    assert proc.wait(30) == 0, proc.describe()
    value: dict = json.loads(proc.stdout())  # type: ignore[type-arg]
    return value


def test_a_crawl_worker_exits_when_idle_with_its_connections_and_warc_closed(
    procs: Procs, db_url: str, tmp_path: Path
) -> None:
    # `trawl worker --crawl` closes the crawl's HTTP session on its own loop as it stops:
    # before, aiohttp logged "Unclosed client session" and "Unclosed connector" at exit.
    warc = tmp_path / "w.warc.gz"
    with SiteServer(generate(40)) as server:
        options = Options(warc=str(warc), timeout=5.0)
        crawl_id = site_crawl.create(db_url, server, depth=2, options=options)
        worker = procs.trawl(
            "--db", db_url, "worker", "--crawl", "--exit-when-idle", "--no-progress"
        )
        assert worker.wait(timeout=120) == 0, worker.describe()
    found = site_crawl.pages(db_url, crawl_id)
    assert len(site_crawl.fetched(found)) > 10
    assert "Unclosed" not in worker.stderr(), worker.describe()
    assert "Traceback" not in worker.stderr(), worker.describe()
    assert warc.stat().st_size > 0
