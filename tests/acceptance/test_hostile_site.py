"""`trawl crawl` over a hostile site: it finishes within a bound, in bounded memory, fetches
every normal page and nothing robots.txt forbids (tests/support/hostile.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import hostile
from tests.support.procs import trawl_command, wait_for

pytestmark = pytest.mark.slow

TIME_LIMIT = 150.0
RSS_LIMIT = 600 << 20  # the bombs alone decode to 300 MiB; the crawler keeps 20 MiB of each


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[hostile.Host, hostile.Host]]:
    with hostile.serve() as hosts:
        yield hosts


def _env(tmp: Path) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "TRAWL_DB"} | {
        "TRAWL_RUNTIME_DIR": str(tmp / "run")
    }


def _crawl_args(url: str, *seeds: str) -> list[str]:
    return [
        *trawl_command(), "--db", url, "crawl", *seeds,
        "--accept", r"^http://127\.0\.0\.1:", "--reject", "/many/",
        "--timeout", "3s", "--max-crawl-delay", "0.01", "--concurrency", "8",
        "--host-grace", "10s",
        "--warc", "out.warc.gz", "--no-progress",
    ]  # fmt: skip


def _peak_rss(pid: int) -> int:
    """VmHWM of a running process, in bytes (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _trawl_json(tmp: Path, url: str, *args: str) -> Any:
    done = subprocess.run(
        [*trawl_command(), "--db", url, *args, "--json"],
        cwd=tmp,
        env=_env(tmp),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


def test_a_crawl_of_a_hostile_site_finishes_in_bounded_time_and_memory(
    tmp_path: Path, sqlite_url: str, site: tuple[hostile.Host, hostile.Host]
) -> None:
    main, flaky = site
    started = time.monotonic()
    proc = subprocess.Popen(
        _crawl_args(sqlite_url, f"{main.base}/", f"{flaky.base}/"),
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _peak_rss(proc.pid))
        assert time.monotonic() - started < TIME_LIMIT, "the crawl did not finish in time"
        time.sleep(0.2)
    out, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert "FINISHED" in out, out
    assert 0 < peak < RSS_LIMIT, f"peak RSS {peak >> 20} MiB"

    fetched = set(main.paths())
    # Every normal page, and nothing robots.txt forbids (longest match, `$`, the redirect).
    assert {f"/normal/{n}" for n in range(hostile.NORMAL)} <= fetched
    assert {"/doc.pdfx", "/public", "/malformed", "/css-bait.html", "/style.css"} <= fetched
    assert not fetched & {"/doc.pdf", "/private/secret"}
    assert not any(path.startswith("/many/") for path in fetched)
    # An endless redirect chain stops at ten hops; a loop is fetched once around.
    redirects = [p for p in main.paths() if p.startswith("/redirect/")]
    assert sorted(set(redirects), key=lambda p: int(p.split("/")[-1])) == [
        f"/redirect/{n}" for n in range(11)
    ]
    assert main.paths().count("/loop/a") == 1
    assert main.paths().count("/loop/b") == 1
    # The host whose robots.txt erred first was not fetched until it answered.
    assert flaky.paths().count("/robots.txt") == 2
    assert flaky.first("/page") > [at for p, at in flaky.log if p == "/robots.txt"][1]

    pages = {p["url"].removeprefix(main.base): p for p in _pages(tmp_path, sqlite_url)}
    assert pages["/redirect/10"]["state"] == "FAILED"
    attempts = _attempts(sqlite_url)
    many = [a for a in attempts if a["url"].endswith("/many")]
    assert many, "the page with 50,000 links was fetched"
    assert many[-1]["outlinks"] == 10_000
    assert many[-1]["outlinks_cut"] == "links"
    chain = [a for a in attempts if a["url"].endswith("/redirect/10")]
    assert "redirect chain of 11 exceeds max_redirects 10" in str(chain[-1]["error"])


def test_sigterm_stops_a_crawl_busy_with_a_css_bait(
    tmp_path: Path, sqlite_url: str, site: tuple[hostile.Host, hostile.Host]
) -> None:
    main, _ = site
    proc = subprocess.Popen(
        _crawl_args(sqlite_url, f"{main.base}/css-bait.html", f"{main.base}/drip"),
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: "/css-bait.html" in main.paths(), "the bait to be fetched")
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)  # raises if the signal went unhandled


def _pages(tmp: Path, url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = _trawl_json(tmp, url, "crawl", "pages", "1")["pages"]
    return found


def _attempts(url: str) -> list[dict[str, Any]]:
    from trawl.store.store import Store

    with Store(url) as store:
        return store.crawls.attempts(1)
