"""Every page renders what the store holds, and every bad request gets a page that says
what was wrong, with the status the API would give; on both backends."""

from __future__ import annotations

import html
from urllib.parse import quote

import pytest

from tests.dashboard import seed
from tests.dashboard.conftest import Site, sign_in
from trawl.store.store import Store


def _crawl_in(db: str) -> int:
    """A crawl of two pages on a port nothing serves, created as the API creates one."""
    from trawl.crawl import operations
    from trawl.crawl.app import make_app
    from trawl.store.crawls import FETCH_TASK

    with Store(db) as store:
        operations.register(store, make_app().get(FETCH_TASK).info())
        seeds = ("http://127.0.0.1:9/a", "http://127.0.0.1:9/b_x")
        return operations.create(store, operations.CrawlSpec(seeds=seeds, depth=2))


def _crawl(site: Site) -> int:
    made = site.http.post(
        "/crawls",
        json={"seeds": ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b_x"], "depth": 2},
        headers={"Authorization": f"Bearer {site.tokens['write']}"},
    )
    assert made.status_code == 201, made.text
    crawl_id: int = made.json()["crawl"]["id"]
    return crawl_id


def _text(site: Site, path: str, status: int = 200) -> str:
    answer = site.http.get(path)
    assert answer.status_code == status, (path, answer.status_code, answer.text[-600:])
    assert answer.headers["content-type"].startswith("text/html")
    return html.unescape(answer.text)


def test_each_page_shows_what_the_store_holds(site: Site) -> None:
    crawl_id = _crawl(site)
    seed.failed(site.db, "sku:1", message="no price on the page")
    seed.aliased(site.db, "sku:2", "ean:123")
    sign_in(site.http, site.tokens["read"])

    overview = _text(site, "/")
    assert "price" in overview
    assert "stock" in overview
    assert "Workers holding leases" in overview
    assert f'href="/ui/crawls/{crawl_id}"' in _text(site, "/ui/crawls")
    crawl = _text(site, f"/ui/crawls/{crawl_id}")
    assert "http://127.0.0.1:9/a" in crawl
    assert "version 1" in crawl
    assert "No requests in the last 10 minutes." in crawl
    only_b = _text(site, f"/ui/crawls/{crawl_id}?q=b_x")  # _ is literal, not LIKE's any
    assert "http://127.0.0.1:9/b_x" in only_b
    assert "http://127.0.0.1:9/a<" not in only_b
    assert "No pages match." in _text(site, f"/ui/crawls/{crawl_id}?q=a_x")
    assert "No pages match." in _text(site, f"/ui/crawls/{crawl_id}?status=done")
    page = _text(site, f"/ui/crawls/{crawl_id}/page?url={quote('http://127.0.0.1:9/a')}")
    assert "Not fetched yet." in page

    failures = _text(site, "/ui/failures")
    assert "ValueError" in failures
    group = _text(site, "/ui/failures/group?task=price&error_type=ValueError")
    assert "no price on the page" in group
    assert "sku:1" in group
    assert "ValueError: no price on the page" in _text(site, "/ui/failures/1")

    item = site.http.get("/ui/items?q=ean:123", follow_redirects=False)
    assert item.status_code == 303
    assert item.headers["location"] == "/ui/item?id=sku%3A2"
    shown = _text(site, "/ui/item?id=sku:2")
    assert "a kettle" in shown
    assert "ean:123" in shown
    assert "alias.created" in shown
    tagged = _text(site, "/ui/items?q=product&by=tag")
    assert "sku:1" in tagged
    assert "sku:2" in tagged
    journal = _text(site, "/ui/journal?kind=alias.created")
    assert "ean:123" in journal
    assert "job.failed<" not in journal
    assert "job.failed<" in _text(site, "/ui/journal?task=price")
    assert "No rate limits" in _text(site, "/ui/limits")
    assert "No pipeline yet" in _text(site, "/ui/pipelines")


def test_the_pipelines_page_lists_them_and_a_write_session_drains_one(site: Site) -> None:
    with Store(site.db) as store:
        store.pipelines.create("fetch-eu", tags=["eu"], match_only=True, slots=8, now=1.0)
        store.pipelines.checkin("fetch-eu", 2.0, in_use=3, free=5 << 30, total=10 << 30)
    read = sign_in(site.http, site.tokens["read"])
    shown = _text(site, "/ui/pipelines")
    assert "fetch-eu" in shown
    assert 'eu <span class="muted">(match only)</span>' in shown
    assert "3/8" in shown
    assert "not connected" in shown
    assert "read only" in shown
    assert "Pipelines" in _text(site, "/")
    refused = site.http.post("/ui/pipelines/fetch-eu/drain", data={"_csrf": read})
    assert refused.status_code == 403
    csrf = sign_in(site.http, site.tokens["write"])
    drained = site.http.post(
        "/ui/pipelines/fetch-eu/drain", data={"_csrf": csrf}, follow_redirects=False
    )
    assert drained.status_code == 303
    assert "fetch-eu drains" in _text(site, drained.headers["location"])
    with Store(site.db) as store:
        assert store.pipelines.require("fetch-eu").draining
    gone = site.http.post("/ui/pipelines/nope/disconnect", data={"_csrf": csrf})
    assert gone.status_code == 404
    assert "no pipeline is named 'nope'" in html.unescape(gone.text)


@pytest.mark.parametrize(
    ("path", "status", "said"),
    [
        ("/ui/crawls/999", 404, "no crawl has the id 999"),
        ("/ui/crawls/1?status=lost", 400, "status"),
        ("/ui/crawls/1/page?url=http%3A%2F%2Fnope.example%2F", 404, "has no page"),
        ("/ui/crawls/1/page", 400, "url"),
        ("/ui/crawls?before=0", 400, "before"),
        ("/ui/item?id=sku:404", 404, "no item has the id or alias 'sku:404'"),
        ("/ui/item?id=", 400, "id"),
        ("/ui/items?q=a%00b", 400, "control character"),
        ("/ui/items?q=x&by=colour", 400, "by"),
        ("/ui/failures/999", 404, "no failure has the id 999"),
        ("/ui/failures/group?task=price", 400, "error_type"),
        ("/ui/journal?item=a%00b", 400, "control character"),
        ("/ui/live/crawls/999", 404, "no crawl has the id 999"),
    ],
)
def test_bad_requests_get_a_page_saying_what_was_wrong(
    site: Site, path: str, status: int, said: str
) -> None:
    _crawl(site)
    sign_in(site.http, site.tokens["read"])
    text = _text(site, path, status)
    assert said in text, text[-800:]


@pytest.mark.parametrize(
    ("path", "data", "status", "said"),
    [
        ("/ui/crawls/1/concurrency", {"value": "many"}, 400, "concurrency must be a whole"),
        ("/ui/crawls/1/concurrency", {"value": "0"}, 400, "between 1 and 10,000"),
        ("/ui/crawls/1/concurrency", {}, 400, "field 'value' is empty"),
        ("/ui/crawls/1/niceness", {"value": "99999999"}, 400, "niceness must be between"),
        ("/ui/crawls/999/abort", {}, 404, "no crawl has the id 999"),
        ("/ui/crawls/999/resume", {}, 404, "no crawl has the id 999"),
        ("/ui/crawls/1/rules", {"ensure": "1"}, 400, "nothing to change"),
        ("/ui/crawls/1/rules", {"ensure": "1", "kind": "skip", "match": "("}, 400, "not a regular"),
        (
            "/ui/crawls/1/rules",
            {"ensure": "1", "kind": "colour", "match": "x"},
            400,
            "unknown rule",
        ),
        (
            "/ui/crawls/1/rules",
            {"ensure": "1", "kind": "skip", "match": "x", "value": "maybe"},
            400,
            "true or false",
        ),
        ("/ui/crawls/1/rules", {"ensure": "1", "remove": "7"}, 400, "there is no rule 7"),
        ("/ui/crawls/1/rules", {"kind": "skip", "match": "x"}, 400, "field 'ensure' is empty"),
        ("/ui/failures/act", {"do": "forget", "ids": "1"}, 400, "do must be 'retry' or 'handle'"),
        ("/ui/failures/act", {"do": "retry"}, 400, "tick at least one failure"),
        ("/ui/failures/act", {"do": "retry", "ids": "x"}, 400, "whole number"),
    ],
)
def test_bad_forms_get_a_page_saying_what_was_wrong(
    site: Site, path: str, data: dict[str, str], status: int, said: str
) -> None:
    _crawl(site)
    csrf = sign_in(site.http, site.tokens["write"])
    with Store(site.db) as store:
        before = (store.crawls.get(1), store.crawls.ruleset(1, 1))
    answer = site.http.post(path, data={"_csrf": csrf, **data})
    assert answer.status_code == status, answer.text[-600:]
    assert said in html.unescape(answer.text)
    with Store(site.db) as store:
        assert (store.crawls.get(1), store.crawls.ruleset(1, 1)) == before


def test_retry_and_handle_several_failures_at_once(site: Site) -> None:
    for n in range(3):
        seed.failed(site.db, f"sku:{n}")
    csrf = sign_in(site.http, site.tokens["write"])
    retried = site.http.post(
        "/ui/failures/act", data={"_csrf": csrf, "do": "retry", "ids": ["1", "2"]}
    )
    assert "Retrying 2 of 2." in retried.text
    with Store(site.db) as store:
        assert [f.id for f in store.failures()] == [3]
    handled = site.http.post(
        "/ui/failures/act",
        data={"_csrf": csrf, "do": "handle", "ids": "3", "back": "https://evil.example/"},
        follow_redirects=False,
    )
    assert handled.headers["location"] == "/ui/failures"  # only back to the dashboard
    with Store(site.db) as store:
        assert store.failures() == []
