"""Rendering one page: load, network idle, the custom script, network idle again, then the
DOM and a full-page screenshot, all within one deadline.

A page that never finishes loading is kept as far as it got (its load error is recorded);
a custom script that throws is recorded and the page is still captured; only a page that
cannot be captured at all (its whole deadline passed, the browser crashed) fails the
attempt, to be retried like any other failed fetch.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trawl.crawl.browser.traffic import Traffic

if TYPE_CHECKING:
    from playwright.async_api import Page

SCRIPT_TIMEOUT = 10.0  # seconds a custom script may run
SCREENSHOT_TIMEOUT = 10.0  # seconds a full-page screenshot may take
SLACK = 5.0  # opening the tab, reading the DOM
MAX_SCREENSHOT_HEIGHT = 20_000  # CSS pixels: an endless page is shot this far down
MAX_RESULT = 64 << 10  # characters of a custom script's result kept on the attempt


class RenderFailed(Exception):
    """The page could not be captured within its deadline, or its browser went away."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Timing:
    load: float  # seconds the load event is waited for
    idle: float  # seconds network idle is waited for, after load and after the script

    @property
    def deadline(self) -> float:
        """Everything a page may take: load, two idle waits, the script, the screenshot
        (59 s with the defaults: it fits in the fetch task's default 60 s timeout)."""
        return self.load + 2 * self.idle + SCRIPT_TIMEOUT + SCREENSHOT_TIMEOUT + SLACK


@dataclass(frozen=True, kw_only=True, slots=True)
class Rendered:
    html: str  # the DOM after scripts ran, serialised
    url: str  # the page's URL as the browser ended on it (links resolve against it)
    screenshot: bytes | None  # PNG
    script_result: str | None  # JSON: {"value": ...} or {"error": "..."}
    load_error: str | None


async def render(
    page: Page, url: str, traffic: Traffic, timing: Timing, script: str | None
) -> Rendered:
    """Render *url* in *page*, its requests answered by *traffic*."""
    try:
        async with asyncio.timeout(timing.deadline):
            return await _render(page, url, traffic, timing, script)
    except TimeoutError:
        raise RenderFailed(f"the page was not captured within {timing.deadline:g}s") from None
    except RenderFailed:
        raise
    except Exception as error:  # Playwright's errors: the page or its browser is gone
        raise RenderFailed(f"{type(error).__name__}: {_first_line(error)}") from None


async def _render(
    page: Page, url: str, traffic: Traffic, timing: Timing, script: str | None
) -> Rendered:
    await page.route("**/*", traffic.handle)
    load_error = await _load(page, url, timing.load)
    await traffic.idle(timing.idle)
    result = None
    if script is not None:
        result = await _run(page, script, SCRIPT_TIMEOUT)
        await traffic.idle(timing.idle)
    html = await page.content()
    return Rendered(
        html=html,
        url=page.url,
        screenshot=await _screenshot(page),
        script_result=result,
        load_error=load_error,
    )


async def _load(page: Page, url: str, limit: float) -> str | None:
    from playwright.async_api import TimeoutError as LoadTimeout

    try:
        await page.goto(url, wait_until="load", timeout=limit * 1000)
    except LoadTimeout:
        return f"the page did not finish loading within {limit:g}s"
    return None


async def _run(page: Page, script: str, limit: float) -> str:
    """Run the custom script as the body of an async function; its result as JSON."""
    from playwright.async_api import Error as PageError

    source = f"async () => {{\n{script}\n}}"
    try:
        async with asyncio.timeout(limit):
            value = await page.evaluate(source)
    except TimeoutError:
        return _json({"error": f"the custom script ran past {limit:g}s"})
    except PageError as error:
        return _json({"error": _first_line(error).removeprefix("Page.evaluate: ")})
    return _json({"value": value})


async def _screenshot(page: Page) -> bytes | None:
    """A full-page PNG, cut at MAX_SCREENSHOT_HEIGHT; ``None`` if the page cannot be shot
    (the page is captured all the same)."""
    try:
        height = await page.evaluate("document.documentElement.scrollHeight")
        width = page.viewport_size["width"] if page.viewport_size else 1280
        tall = min(int(height or 1), MAX_SCREENSHOT_HEIGHT)
        clip: Any = {"x": 0, "y": 0, "width": width, "height": tall}  # Playwright's Clip
        return await page.screenshot(
            full_page=True, clip=clip, timeout=SCREENSHOT_TIMEOUT * 1000, animations="disabled"
        )
    except Exception:
        return None


def _json(value: dict[str, Any]) -> str:
    text = json.dumps(value, default=str)
    if len(text) > MAX_RESULT:
        return json.dumps({"error": f"the result of {len(text)} characters was not kept"})
    return text


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:500]
