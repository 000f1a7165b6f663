"""The worker's browser: started on first use, restarted after a crash, replaced after
its share of pages so memory stays bounded, and closed with everything it started."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.js_site import need_chromium
from trawl.crawl import state
from trawl.crawl.app import make_app
from trawl.crawl.browser.chromium import ENV, BrowserUnavailable
from trawl.crawl.browser.pool import Browsers
from trawl.crawl.personas import preset
from trawl.runtime.actor.spec import ActorInfo
from trawl.store.crawls import FETCH_TASK

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _browser_pids() -> list[int]:
    """Chromium main processes (not its renderers and helpers) started by this process."""
    mine, found = {os.getpid()}, []
    grew = True
    procs = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            procs[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    while grew:  # descendants of this process, however deep
        grew = False
        for pid, (parent, _) in procs.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grew = True
    for pid in mine - {os.getpid()}:
        argv = procs[pid][1]
        main = b"chrom" in argv[0] and b"crashpad" not in argv[0]
        if main and not any(a.startswith(b"--type=") for a in argv):
            found.append(pid)
    return found


async def _until(condition: Callable[[], bool], limit: float = 30.0) -> None:
    """Poll *condition* (another process's exit has no event to await here)."""
    async with asyncio.timeout(limit):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def _render(browsers: Browsers, text: str) -> str:
    async with browsers.tab(preset("desktop-chrome")) as page:
        await page.set_content(f"<p>{text}</p>")
        return await page.inner_text("p")


def test_a_crashed_browser_is_replaced_by_the_next_page() -> None:
    need_chromium()

    async def scenario() -> None:
        browsers = Browsers()
        try:
            assert await _render(browsers, "one") == "one"
            (pid,) = _browser_pids()
            os.kill(pid, signal.SIGKILL)
            await _until(lambda: not browsers.running)  # the crash noticed
            assert await _render(browsers, "two") == "two"
            assert browsers.launches == 2
            assert len(_browser_pids()) == 1
        finally:
            await browsers.close()
        await _until(lambda: not _browser_pids())  # every browser closed

    asyncio.run(scenario())


def test_the_browser_is_replaced_after_its_share_of_pages() -> None:
    need_chromium()

    async def scenario() -> None:
        browsers = Browsers(recycle_after=2)
        try:
            texts = [await _render(browsers, f"page {n}") for n in range(5)]
            assert texts == [f"page {n}" for n in range(5)]
            assert browsers.launches == 3  # pages 1-2, 3-4, 5
            await _until(lambda: len(_browser_pids()) == 1)  # the old browsers closed
        finally:
            await browsers.close()

    asyncio.run(scenario())


def test_tabs_up_to_the_concurrency_share_one_browser() -> None:
    need_chromium()

    async def scenario() -> None:
        browsers = Browsers()
        try:
            texts = await asyncio.gather(*(_render(browsers, f"tab {n}") for n in range(4)))
            assert sorted(texts) == [f"tab {n}" for n in range(4)]
            assert browsers.launches == 1
        finally:
            await browsers.close()

    asyncio.run(scenario())


def test_no_chromium_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "/nonexistent/chromium")

    async def scenario() -> None:
        browsers = Browsers()
        with pytest.raises(BrowserUnavailable, match="/nonexistent/chromium is not an executable"):
            await _render(browsers, "x")
        await browsers.close()

    asyncio.run(scenario())


def test_the_fetch_actor_closes_its_browser_as_it_stops() -> None:
    """Under `trawl run`, the fetch task's actor owns its process's browser."""
    need_chromium()

    async def scenario() -> None:
        browsers = state.runtime().browsers
        assert await _render(browsers, "x") == "x"
        assert browsers.running
        actor = make_app().get(FETCH_TASK).actor
        assert actor.on_shutdown is not None
        info = ActorInfo(type=FETCH_TASK, key=None, pid=os.getpid(), owner="o", tasks=())
        await actor.on_shutdown(info, None)
        assert not browsers.running
        await _until(lambda: not _browser_pids())

    asyncio.run(scenario())
