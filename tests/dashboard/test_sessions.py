"""Sessions, CSRF and scopes: who may look and who may act, on both backends. Every form
of the dashboard is found from the application's own routes, so a new one is covered as
soon as it exists."""

from __future__ import annotations

import html
import time
from typing import Any

import pytest
from litestar import Litestar
from litestar.handlers import HTTPRouteHandler

from tests.dashboard.conftest import Site, sign_in, signin_form
from trawl.server.dashboard.session import COOKIE
from trawl.store.store import Store


def _routes(app: Litestar) -> list[tuple[str, str, str | None]]:
    """(method, path, scope needed) of every dashboard route."""
    found = []
    for route in app.routes:
        for handler in getattr(route, "route_handlers", []):
            if isinstance(handler, HTTPRouteHandler) and "session" in handler.opt:
                for method in handler.http_methods:
                    found.append((method, route.path, handler.opt["session"]))
    return sorted(set(found))


def _concrete(path: str) -> str:
    path = path.replace("{crawl_id:int}", "1").replace("{failure_id:int}", "1")
    return path.replace("{pipeline_id:str}", "p1")


def _forms(app: Litestar) -> list[tuple[str, str | None]]:
    return [(_concrete(p), need) for m, p, need in _routes(app) if m == "POST"]


def _pages(app: Litestar) -> list[str]:
    return [_concrete(p) for m, p, need in _routes(app) if m == "GET" and need is not None]


def _app(site: Site) -> Litestar:
    app: Litestar = site.http.app
    return app


def _crawl(site: Site) -> int:
    made = site.http.post(
        "/crawls",
        json={"seeds": ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]},
        headers={"Authorization": f"Bearer {site.tokens['write']}"},
    )
    assert made.status_code == 201, made.text
    crawl_id: int = made.json()["crawl"]["id"]
    return crawl_id


def _state(site: Site) -> tuple[Any, ...]:
    """What any dashboard form could change: the crawl, its rules, the failures, the
    pipelines."""
    with Store(site.db) as store:
        crawl = store.crawls.get(1)
        version = crawl.ruleset if crawl else None
        return (crawl, version, store.failures(include_handled=True), store.pipelines.list())


def test_every_page_needs_a_session(site: Site) -> None:
    pages = _pages(_app(site))
    assert "/" in pages
    assert "/ui/crawls/1" in pages
    assert "/ui/live/overview" in pages
    for path in pages:
        if path.startswith("/ui/live/"):  # as a browser's EventSource asks
            headers = {"Accept": "text/event-stream"}
            answer = site.http.get(path, follow_redirects=False, headers=headers)
            assert answer.status_code == 401, path
        else:
            answer = site.http.get(path, follow_redirects=False)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/ui/signin?next="), path


def test_every_form_refuses_a_missing_or_wrong_csrf_token(site: Site) -> None:
    _crawl(site)
    sign_in(site.http, site.tokens["admin"])
    before = _state(site)
    forms = _forms(_app(site))
    assert len(forms) >= 8, forms
    for path, need in forms:
        if need is None:
            continue  # the sign-in form checks its own token: below
        missing = site.http.post(path, data={"value": "3", "do": "handle", "ids": "1"})
        assert missing.status_code == 403, (path, missing.status_code)
        assert "CSRF token is missing or out of date" in missing.text, path
        wrong = site.http.post(path, data={"_csrf": "x" * 32, "value": "3"})
        assert wrong.status_code == 403, path
        by_header = site.http.post(path, data={"value": "3"}, headers={"X-CSRF-Token": "nope"})
        assert by_header.status_code == 403, path
    assert _state(site) == before  # nothing was done


def test_the_signin_form_has_its_own_csrf_token(site: Site) -> None:
    no_cookie = site.http.post("/ui/signin", data={"_csrf": "x", "token": site.tokens["read"]})
    assert no_cookie.status_code == 403
    assert "expired" in no_cookie.text
    assert COOKIE not in site.http.cookies
    csrf = signin_form(site.http)
    forged = site.http.post("/ui/signin", data={"_csrf": csrf + "x", "token": site.tokens["read"]})
    assert forged.status_code == 403
    assert COOKIE not in site.http.cookies


def test_a_read_session_cannot_act(site: Site) -> None:
    _crawl(site)
    csrf = sign_in(site.http, site.tokens["read"])
    before = _state(site)
    for path, need in _forms(_app(site)):
        if need != "write":
            continue
        data = {"_csrf": csrf, "value": "3", "do": "handle", "ids": "1", "ensure": "1"}
        answer = site.http.post(path, data={**data, "match": "x", "kind": "skip"})
        assert answer.status_code == 403, (path, answer.status_code)
        assert "needs a token with scope 'write'" in html.unescape(answer.text), path
    assert _state(site) == before
    page = site.http.get("/ui/crawls/1")
    assert "Abort crawl" not in page.text
    assert "need a write token" in page.text


def test_a_write_session_acts_with_its_csrf_token(site: Site) -> None:
    crawl_id = _crawl(site)
    csrf = sign_in(site.http, site.tokens["write"])
    done = site.http.post(
        f"/ui/crawls/{crawl_id}/concurrency",
        data={"_csrf": csrf, "value": "3"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert done.headers["location"] == f"/ui/crawls/{crawl_id}"
    page = site.http.get(done.headers["location"])
    assert "Concurrency is now 3." in page.text  # the one-time message
    assert "Concurrency is now 3." not in site.http.get(f"/ui/crawls/{crawl_id}").text
    with Store(site.db) as store:
        crawl = store.crawls.get(crawl_id)
        assert crawl is not None
        assert crawl.concurrency == 3


def test_bad_tokens_are_refused_and_say_why(site: Site) -> None:
    for token, status, said in [
        ("", 400, "Paste a token"),
        ("trawl_abc_def", 401, "not known or was revoked"),
        ("not a token at all", 401, "not known or was revoked"),
        (site.tokens["read"] + "x", 401, "not known or was revoked"),
    ]:
        csrf = signin_form(site.http)
        answer = site.http.post("/ui/signin", data={"_csrf": csrf, "token": token})
        assert answer.status_code == status, token
        assert said in answer.text
        assert COOKIE not in site.http.cookies


def test_the_session_cookie_is_httponly_strict_and_not_the_token(site: Site) -> None:
    csrf = signin_form(site.http)
    answer = site.http.post(
        "/ui/signin",
        data={"_csrf": csrf, "token": site.tokens["write"], "next": "//evil.example/x"},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/"  # never to another site
    header = next(h for h in answer.headers.get_list("set-cookie") if h.startswith(COOKIE))
    assert "HttpOnly" in header
    assert "SameSite=strict" in header or "SameSite=Strict" in header
    assert "Path=/" in header
    value = site.http.cookies[COOKIE]
    secret = site.tokens["write"].split("_", 2)[2]
    assert secret not in value


def test_a_tampered_or_expired_cookie_is_no_session(site: Site) -> None:
    sign_in(site.http, site.tokens["read"])
    good = site.http.cookies[COOKIE]
    version, tid, expires, nonce, mac = good.split(".")
    forged = [
        f"{version}.{tid}.{int(expires) + 999}.{nonce}.{mac}",  # a longer life
        f"{version}.{tid}.{expires}.{nonce}x.{mac}",
        f"{version}.{tid}.{int(time.time()) - 1}.{nonce}.{mac}",  # expired
        f"{version}.nobody.{expires}.{nonce}.{mac}",
        "v1.a.b.c.d",
        "garbage",
        "x" * 400,
    ]
    for value in forged:
        site.http.cookies.clear()
        site.http.cookies[COOKIE] = value
        answer = site.http.get("/", follow_redirects=False)
        assert answer.status_code == 303, value
    site.http.cookies.clear()
    site.http.cookies[COOKIE] = good
    assert site.http.get("/", follow_redirects=False).status_code == 200


def test_revoking_the_token_ends_its_sessions(site: Site) -> None:
    sign_in(site.http, site.tokens["write"])
    assert site.http.get("/", follow_redirects=False).status_code == 200
    with Store(site.db) as store:
        assert store.tokens.revoke("t-write", store.clock())
    assert site.http.get("/", follow_redirects=False).status_code == 303  # cache is 0 here


def test_signing_out_drops_the_cookie(site: Site) -> None:
    csrf = sign_in(site.http, site.tokens["read"])
    out = site.http.post("/ui/signout", data={"_csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303
    assert out.headers["location"] == "/ui/signin"
    assert COOKIE not in site.http.cookies
    assert site.http.get("/", follow_redirects=False).status_code == 303


def test_pages_are_not_cached_nor_framed(site: Site) -> None:
    sign_in(site.http, site.tokens["read"])
    page = site.http.get("/")
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


@pytest.mark.parametrize("scope", ["read", "write"])
def test_api_routes_still_need_a_bearer_token(site: Site, scope: str) -> None:
    """A dashboard session is not an API credential: the JSON API still wants its header."""
    sign_in(site.http, site.tokens[scope])
    assert site.http.get("/tasks").status_code == 401
    assert site.http.post("/crawls/1/abort").status_code == 401
