"""The dashboard over a real server: a signed-in client for the HTTP rules, and a real
headless browser (Debian's chromium driven by Playwright) for the flows a person follows.

A browser test that fails leaves a screenshot of its page in test-artifacts/ (named after
the test), so a failure in CI can be looked at."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from litestar.testing import TestClient

from tests.api.conftest import make_tokens
from tests.support.uvicorn_thread import in_thread
from trawl.server.app import create_app

T = TypeVar("T")
CHROMIUM = "/usr/bin/chromium"
# As the machine's notes give them: no sandbox as root, and none of Chromium's own traffic
# (background networking, component updates, sync), which a closed network refuses.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def run_async(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run(main())`` in a thread of its own: the browser tests' Playwright keeps
    an event loop running in this one."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(main())).result()


def signin_form(client: TestClient) -> str:  # type: ignore[type-arg]
    """The sign-in page's CSRF value (its cookie is now in the client)."""
    page = client.get("/ui/signin")
    found = re.search(r'name="_csrf" value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


def sign_in(client: TestClient, token: str) -> str:  # type: ignore[type-arg]
    """Sign *client* in with *token*; the session's CSRF token."""
    csrf = signin_form(client)
    answer = client.post("/ui/signin", data={"_csrf": csrf, "token": token}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    overview = client.get("/")
    found = re.search(r'name="_csrf" value="([^"]+)"', overview.text)
    assert found, overview.text
    return found.group(1)


@dataclass
class Site:
    db: str
    tokens: dict[str, str]
    http: TestClient  # type: ignore[type-arg]


@pytest.fixture
def site(db_url: str) -> Iterator[Site]:
    """The app in-process over a fresh database on each backend, signed in as nobody."""
    tokens = make_tokens(db_url)
    app = create_app(db_url, connections=4, token_cache=0.0, refresh=0.2)
    with TestClient(app) as http:
        yield Site(db=db_url, tokens=tokens, http=http)


@dataclass
class Server:
    base: str
    db: str
    tokens: dict[str, str]


@pytest.fixture
def server(sqlite_url: str) -> Iterator[Server]:
    """A real server (uvicorn) for the browser; its live pages refresh every 0.3 s."""
    tokens = make_tokens(sqlite_url)
    app = create_app(sqlite_url, token_cache=0.0, metrics_cache=0.2, refresh=0.3)
    # The live pages' event streams never end by themselves: a short graceful shutdown.
    with in_thread(app, "dashboard", timeout_graceful_shutdown=2) as port:
        yield Server(base=f"http://127.0.0.1:{port}", db=sqlite_url, tokens=tokens)


# Module-scoped, not session-scoped: Playwright's sync API runs an event loop in this
# thread while it is started, and every later test's asyncio.run() would refuse to run.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: scripts/check installs it (apt-get install -y chromium)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_FAILED] = report.failed


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def context(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser profile (no cookies) for one test; every page it opened is
    screenshotted into test-artifacts/ if the test failed."""
    made = browser.new_context(viewport={"width": 1400, "height": 900})
    made.set_default_timeout(15_000)
    yield made
    if request.node.stash.get(_FAILED, False):
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^\w.-]+", "_", request.node.name)
        for n, page in enumerate(made.pages):
            path = ARTIFACTS / f"{name}-{n}.png"
            page.screenshot(path=str(path), full_page=True)
            print(f"screenshot of the failed test's page: {path}")
    made.close()


def browser_sign_in(page: Any, base: str, token: str) -> None:
    page.goto(base + "/")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/")
