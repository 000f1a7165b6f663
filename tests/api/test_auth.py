"""Every route but /health needs a bearer token, and a big enough scope for what it does.
The routes are taken from the server's own OpenAPI document, so a new route is covered
the day it is added."""

from __future__ import annotations

import re

import pytest

from tests.api.conftest import Api

PUBLIC = {("get", "/health")}


def _routes(api: Api) -> list[tuple[str, str]]:
    doc = api.http.get("/openapi.json").json()
    found = []
    for path, ops in doc["paths"].items():
        for method in ops:
            if method in {"get", "post", "put", "patch", "delete"}:
                concrete = re.sub(r"\{[^}]+\}", "1", path)
                found.append((method, concrete))
    assert len(found) > 25, found
    return found


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_every_route_but_health_refuses_a_missing_or_bad_token(api: Api) -> None:
    for method, path in _routes(api):
        for headers in ({"Authorization": ""}, {"Authorization": "Bearer trawl_nope_nope"}):
            answer = api.http.request(method, path, headers=headers)
            if (method, path) in PUBLIC:
                assert answer.status_code == 200, (method, path)
                continue
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert answer.headers["content-type"].startswith("application/problem+json")
    for path in ("/openapi.json", "/docs"):  # the documents themselves too
        assert api.http.get(path, headers={"Authorization": ""}).status_code == 401


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_scopes_read_write_admin(api: Api) -> None:
    doc = api.http.get("/openapi.json").json()
    writes = [
        (m, re.sub(r"\{[^}]+\}", "1", p))
        for p, ops in doc["paths"].items()
        for m in ops
        if m in {"post", "put", "patch", "delete"}
    ]
    for method, path in writes:  # a read token may change nothing
        answer = api.http.request(method, path, headers=api.as_("read"), json={})
        assert answer.status_code == 403, (method, path, answer.text)
        assert "t-read" in answer.json()["detail"]
    reading = api.http.get("/tasks", headers=api.as_("read"))
    assert reading.status_code == 200
    admin_only = api.http.post("/tasks/price/pause", headers=api.as_("write"), json={})
    assert admin_only.status_code == 403
    everything = api.http.post("/failures/retry", headers=api.as_("write"), json={})
    assert everything.status_code == 403  # every failure at once is an admin's call
    one_task = api.http.post("/failures/retry", headers=api.as_("write"), json={"task": "price"})
    assert one_task.status_code == 200


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_revoked_token_stops_working(api: Api) -> None:
    from trawl.store.store import Store

    assert api.http.get("/tasks", headers=api.as_("read")).status_code == 200
    with Store(api.url) as store:
        assert store.tokens.revoke("t-read", store.clock())
    assert api.http.get("/tasks", headers=api.as_("read")).status_code == 401
