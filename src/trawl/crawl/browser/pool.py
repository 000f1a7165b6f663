"""One Chromium per worker process, pages in tabs of their own.

The browser starts on the first page that needs it (a worker whose crawls render nothing
never starts one). Pages of one persona (user agent, viewport) and cookie set share a
browser context, as one visitor's tabs do (and as Browsertrix and brozzler crawl): a
fresh context per page costs about as much CPU as rendering the page. Each tab is closed
with its page. Memory stays bounded because the browser itself, with its contexts, is
replaced after :data:`RECYCLE_PAGES` pages: new pages go to a fresh one while the old one
finishes its tabs and is closed. A browser that crashes (or is killed) is noticed by its
``disconnected`` event; the pages it held fail (and are retried) and the next page starts
a new browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trawl.crawl.browser import chromium
from trawl.crawl.personas import DEFAULT, Persona

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright

log = logging.getLogger("trawl.crawl.browser")

RECYCLE_PAGES = 200  # pages one browser renders before a fresh one takes over
CLOSE_TIMEOUT = 10.0  # a context or browser that will not close in this long is abandoned
# Chromium's own background traffic (updates, safe browsing, field trials) is not the
# page's and would not pass through the page's interception: it is switched off.
ARGS = [
    "--disable-background-networking",
    "--disable-extensions",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--disable-gpu",  # headless on a server: software compositing, no GPU process work
    "--disable-breakpad",  # no crash reporter processes beside each browser
    "--disable-crash-reporter",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-dev-shm-usage",  # containers have a small /dev/shm
    "--disable-sync",
    "--metrics-recording-only",
    "--mute-audio",
    "--no-first-run",
    "--renderer-process-limit=4",  # tabs share renderers: memory grows with pages less
]
# Popups would be pages of their own, outside the page's capture and never closed by it:
# window.open does nothing (and a popup opened another way is closed at once, below).
NO_POPUPS = "window.open = function () { return null; };"


@dataclass(eq=False, kw_only=True)
class _Instance:
    browser: Browser
    served: int = 0  # pages given out
    open: int = 0  # tabs open now
    gone: bool = False  # crashed, or closed
    retiring: bool = False  # served its share: closed once its last tab is
    contexts: dict[tuple[Persona, tuple[tuple[str, str], ...]], BrowserContext] = field(
        default_factory=dict
    )

    async def context(self, persona: Persona, cookies: dict[str, str]) -> BrowserContext:
        key = (persona, tuple(sorted(cookies.items())))
        found = self.contexts.get(key)
        if found is None:
            found = self.contexts[key] = await _context(self.browser, persona)
        return found


class Browsers:
    """The worker process's browser; ``async with browsers.tab(persona, cookies, url)``."""

    def __init__(self, *, recycle_after: int = RECYCLE_PAGES) -> None:
        self.recycle_after = recycle_after
        self.launches = 0  # browsers started so far (a restart counts)
        self._driver: Playwright | None = None
        self._current: _Instance | None = None
        self._retired: set[_Instance] = set()
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def tab(
        self, persona: Persona = DEFAULT, cookies: dict[str, str] | None = None, url: str = ""
    ) -> AsyncIterator[Page]:
        """A new page in its persona's context, closed on the way out."""
        instance = await self._instance()
        instance.open += 1
        instance.served += 1
        if instance.served >= self.recycle_after:
            instance.retiring = True  # the pages after this one go to a fresh browser
        try:
            context = await instance.context(persona, cookies or {})
            if cookies and url:
                await context.add_cookies(
                    [{"name": k, "value": v, "url": url} for k, v in cookies.items()]
                )
            page = await context.new_page()
            try:
                yield page
            finally:
                await _close(page.close(), "a tab")
        finally:
            instance.open -= 1
            await self._settle(instance)

    async def _instance(self) -> _Instance:
        async with self._lock:
            current = self._current
            if current is not None and not current.gone and not current.retiring:
                return current
            if current is not None:
                self._retired.add(current)
                await self._settle(current)
            self._current = await self._launch()
            return self._current

    async def _launch(self) -> _Instance:
        executable = chromium.executable()
        if self._driver is None:
            from playwright.async_api import async_playwright

            self._driver = await async_playwright().start()
        args = [*ARGS, "--no-sandbox"] if os.geteuid() == 0 else ARGS  # root has no sandbox
        browser = await self._driver.chromium.launch(
            executable_path=executable, args=args, headless=True
        )
        self.launches += 1
        instance = _Instance(browser=browser)
        browser.on("disconnected", lambda _: _gone(instance))
        log.info("started Chromium %s (browser %d of this worker)", browser.version, self.launches)
        return instance

    async def _settle(self, instance: _Instance) -> None:
        """Close a crashed or retired browser once none of its tabs is open."""
        if instance is self._current and not (instance.gone or instance.retiring):
            return
        if instance.open > 0:
            return
        self._retired.discard(instance)
        if instance is self._current:
            self._current = None
        if not instance.gone:
            instance.gone = True
            await _close(instance.browser.close(), "a browser")

    async def close(self) -> None:
        """Close every browser and the driver (the worker is stopping)."""
        async with self._lock:
            for instance in [*self._retired, *([self._current] if self._current else [])]:
                if not instance.gone:
                    instance.gone = True
                    await _close(instance.browser.close(), "a browser")
            self._current, self._retired = None, set()
            if self._driver is not None:
                await _close(self._driver.stop(), "the Playwright driver")
                self._driver = None

    @property
    def running(self) -> bool:
        """Whether a browser is up now (for tests and metrics)."""
        return self._current is not None and not self._current.gone


def _gone(instance: _Instance) -> None:
    if not instance.gone:
        log.warning("Chromium exited; the next page starts a new one")
    instance.gone = True


async def _context(browser: Browser, persona: Persona) -> BrowserContext:
    options: dict[str, Any] = {
        "viewport": {"width": persona.width, "height": persona.height},
        "is_mobile": persona.mobile,
        "device_scale_factor": persona.scale,
        "ignore_https_errors": True,  # an archive keeps what a site serves, valid or not
        "service_workers": "block",  # a service worker's fetches would bypass the capture
        "accept_downloads": False,
    }
    if persona.user_agent:
        options["user_agent"] = persona.user_agent
    context = await browser.new_context(**options)
    await context.add_init_script(NO_POPUPS)
    context.on("page", _close_popup)
    return context


async def _close_popup(page: Page) -> None:
    # The crawler's own tabs have no opener; a page opened by a page is a popup.
    # Playwright awaits this handler in a task it owns.
    with contextlib.suppress(Exception):
        if await page.opener() is not None:
            await page.close()


async def _close(closing: Any, what: str) -> None:
    """Close something of the browser's, giving up after CLOSE_TIMEOUT: a hung browser
    must not hold the worker (a browser given up on is killed with the driver)."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await closing
    except Exception as error:  # already gone, or hung: either way it is no longer ours
        log.debug("closing %s: %s", what, error)
