"""The dashboard in a real browser (Debian's chromium, headless, driven by Playwright):
the flows an operator follows, each checked by what the page shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard import seed
from tests.dashboard.conftest import Server, browser_sign_in
from tests.support import site_crawl
from tests.support.procs import Procs
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.options import Options
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

pytestmark = pytest.mark.slow


def test_sign_in_refuses_a_bad_token_then_takes_a_good_one(server: Server, context: Any) -> None:
    page = context.new_page()
    page.goto(server.base + "/ui/crawls")
    expect(page).to_have_url(server.base + "/ui/signin?next=%2Fui%2Fcrawls")
    page.get_by_label("Token").fill("trawl_nothere_secret")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not known or was revoked")
    expect(page.get_by_role("navigation", name="Sections")).to_have_count(0)

    page.get_by_label("Token").fill(server.tokens["read"])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(server.base + "/ui/crawls")  # on to the page first asked for
    expect(page.get_by_text("look only")).to_be_visible()
    page.get_by_role("link", name="Overview").click()
    expect(page.get_by_role("row", name="price")).to_be_visible()


def _count(page: Any, name: str) -> int:
    return int(page.locator(f"#counts [data-count={name}]").inner_text().replace(",", ""))


def test_a_running_crawls_counts_change_without_a_reload(
    server: Server, context: Any, tmp_path: Path
) -> None:
    with SiteServer(generate(80)) as site, Procs(tmp_path / "logs") as procs:
        options = Options(delay=0.2, robots=False)
        crawl_id = site_crawl.create(server.db, site, options=options, concurrency=2)
        page = context.new_page()
        browser_sign_in(page, server.base, server.tokens["read"])
        page.goto(f"{server.base}/ui/crawls/{crawl_id}")
        expect(page.locator("#counts [data-count=done]")).to_have_text("0")
        page.evaluate("window.sameDocument = true")  # gone if the page reloads

        # the real crawler, as an operator runs it, in a process of its own
        crawler = procs.trawl("--db", server.db, "crawl", "resume", str(crawl_id), "--no-progress")
        expect(page.locator("#counts [data-count=done]")).not_to_have_text("0", timeout=30_000)
        first = _count(page, "done")
        expect(page.locator("#counts [data-count=done]")).not_to_have_text(str(first))
        assert _count(page, "done") > first
        expect(page.locator("#depths svg rect").nth(1)).to_be_attached()  # depth 1 found
        expect(page.locator("#hosts tbody tr").first).to_contain_text("127.0.0.1")
        assert page.evaluate("window.sameDocument") is True
        assert crawler.alive, crawler.describe()


def _crawl(server: Server) -> int:
    with Store(server.db) as store:
        operations.register(store, make_app().get(FETCH_TASK).info())  # as the API does
        spec = operations.CrawlSpec(seeds=("http://127.0.0.1:9/a", "http://127.0.0.1:9/b"))
        return operations.create(store, spec)


def test_a_rule_edit_made_against_an_old_version_shows_the_conflict(
    server: Server, context: Any
) -> None:
    crawl_id = _crawl(server)
    first = context.new_page()
    browser_sign_in(first, server.base, server.tokens["write"])
    first.goto(f"{server.base}/ui/crawls/{crawl_id}")
    second = context.new_page()
    second.goto(f"{server.base}/ui/crawls/{crawl_id}")  # both show version 1

    first.get_by_label("Kind").select_option("skip")
    first.get_by_label("Pattern (regex)").fill("/private/")
    first.get_by_role("button", name="Save as version 2").click()
    expect(first.get_by_role("status").filter(has_text="Rules saved as version 2")).to_be_visible()
    expect(first.get_by_role("table", name="current rules, version 2")).to_contain_text("/private/")

    second.get_by_label("Kind").select_option("skip")
    second.get_by_label("Pattern (regex)").fill(r"\.pdf$")
    second.get_by_role("button", name="Save as version 2").click()
    conflict = second.get_by_role("alert")
    expect(conflict).to_contain_text("Not saved: the rules changed meanwhile")
    expect(conflict).to_contain_text("You edited version 1; the rules are now at version 2")
    expect(conflict).to_contain_text(r"skip \.pdf$")
    current = second.get_by_role("table", name="current rules, version 2")
    expect(current).to_contain_text("/private/")  # the other edit, shown
    expect(current).not_to_contain_text(r"\.pdf$")  # this one, not applied

    second.get_by_role("button", name="Save as version 3").click()  # the edit kept in the form
    expect(second.get_by_role("table", name="current rules, version 3")).to_contain_text(r"\.pdf$")


def test_abort_and_resume_a_crawl(server: Server, context: Any) -> None:
    crawl_id = _crawl(server)
    page = context.new_page()
    browser_sign_in(page, server.base, server.tokens["write"])
    page.goto(f"{server.base}/ui/crawls/{crawl_id}")
    expect(page.locator("#crawl-status")).to_have_text("active")

    page.get_by_role("button", name="Abort crawl").click()
    expect(page.get_by_text("Aborted: 2 pages parked.")).to_be_visible()
    expect(page.locator("#crawl-status")).to_have_text("aborted")
    expect(page.locator("#counts [data-count=parked]")).to_have_text("2")

    page.get_by_role("button", name="Resume crawl").click()
    expect(page.get_by_text("Resumed: 2 pages due again.")).to_be_visible()
    expect(page.locator("#crawl-status")).to_have_text("active")
    expect(page.locator("#counts [data-count=ready]")).to_have_text("2")


def test_handle_a_failure_then_retry_the_rest_at_once(server: Server, context: Any) -> None:
    for n in range(3):
        seed.failed(server.db, f"sku:{n}", message="no price on the page")
    page = context.new_page()
    browser_sign_in(page, server.base, server.tokens["write"])
    page.get_by_role("link", name="Failures", exact=True).click()
    group = page.get_by_role("row", name="price")
    expect(group).to_contain_text("ValueError")
    expect(group).to_contain_text("3")
    group.get_by_role("link", name="ValueError").click()

    page.get_by_role("link", name="#").first.click()  # the failure, with its traceback
    expect(page.locator("pre.traceback")).to_contain_text("ValueError: no price on the page")
    page.go_back()

    page.get_by_label("select failure").first.check()
    page.get_by_role("button", name="Mark selected handled").click()
    expect(page.get_by_text("Handled 1 of 1.")).to_be_visible()
    expect(page.get_by_label("select failure")).to_have_count(2)

    page.get_by_label("select every failure shown").check()  # the page's own script
    page.get_by_role("button", name="Retry selected").click()
    expect(page.get_by_text("Retrying 2 of 2.")).to_be_visible()
    expect(page.get_by_text("No unhandled failures in this group.")).to_be_visible()
    page.get_by_role("link", name="Failures", exact=True).click()
    expect(page.get_by_text("No unhandled failures.")).to_be_visible()


def test_find_an_item_by_alias(server: Server, context: Any) -> None:
    seed.aliased(server.db, "sku:42", "ean:4006381333931")
    page = context.new_page()
    browser_sign_in(page, server.base, server.tokens["read"])
    page.get_by_role("link", name="Items", exact=True).click()
    page.get_by_label("Find").fill("ean:4006381333931")
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("sku:42")
    expect(page.locator("pre.json").first).to_contain_text("a kettle")
    expect(page.get_by_role("list", name="Aliases")).to_contain_text("ean:4006381333931")
    expect(page.get_by_role("table", name="Tasks")).to_contain_text("price")
    expect(page.get_by_role("table", name="Journal")).to_contain_text("alias.created")

    page.get_by_role("link", name="Items", exact=True).click()
    page.get_by_label("Find").fill("ean:0000")
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_text("No item has the id or alias")).to_be_visible()


def test_the_journal_tail_shows_new_entries_its_filter_keeps(server: Server, context: Any) -> None:
    page = context.new_page()
    browser_sign_in(page, server.base, server.tokens["read"])
    page.get_by_role("link", name="Journal", exact=True).click()
    page.get_by_label("Kind").fill("alias.created")
    page.get_by_role("button", name="Filter").click()
    table = page.get_by_role("table", name="journal entries, newest first")
    expect(table).to_contain_text("No entries.")

    seed.failed(server.db, "sku:1")  # job.failed: not kept by the filter
    seed.aliased(server.db, "sku:2", "ean:4006381333931")
    expect(table).to_contain_text("ean:4006381333931", timeout=15_000)
    expect(table).not_to_contain_text("No entries.")
    expect(table).not_to_contain_text("job.failed")
