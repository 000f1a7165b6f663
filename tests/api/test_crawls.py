"""Crawls through the API: start, show, rules with the version check, pages, abort."""

from __future__ import annotations

from tests.api.conftest import Api


def test_crawl_lifecycle(api: Api) -> None:
    made = api.http.post(
        "/crawls", json={"seeds": ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"], "depth": 2}
    )
    assert made.status_code == 201, made.text
    crawl = made.json()
    crawl_id = crawl["crawl"]["id"]
    assert crawl["ready"] == 2
    assert [c["id"] for c in api.http.get("/crawls").json()["crawls"]] == [crawl_id]
    pages = api.http.get(f"/crawls/{crawl_id}/pages", params={"limit": 1}).json()
    assert [p["url"] for p in pages["pages"]] == ["http://127.0.0.1:9/a"]
    more = api.http.get(f"/crawls/{crawl_id}/pages", params={"cursor": pages["next"]}).json()
    assert [p["url"] for p in more["pages"]] == ["http://127.0.0.1:9/b"]
    queued = api.http.get(f"/crawls/{crawl_id}/pages", params={"status": "done"}).json()
    assert queued["pages"] == []

    rules = api.http.get(f"/crawls/{crawl_id}/rules").json()
    edit = {"add": [{"kind": "skip", "match": "/private/"}], "ensure": rules["version"]}
    changed = api.http.post(f"/crawls/{crawl_id}/rules", json=edit)
    assert changed.status_code == 200, changed.text
    assert changed.json()["version"] == rules["version"] + 1
    stale = api.http.post(f"/crawls/{crawl_id}/rules", json=edit)
    assert stale.status_code == 409
    assert stale.json()["type"].endswith("/conflict")
    bad = api.http.post(f"/crawls/{crawl_id}/rules", json={"add": [{"kind": "x", "match": "("}]})
    assert bad.status_code == 400

    assert api.http.put(f"/crawls/{crawl_id}/concurrency", json={"value": 3}).is_success
    assert api.http.put(f"/crawls/{crawl_id}/niceness", json={"value": 5}).is_success
    shown = api.http.get(f"/crawls/{crawl_id}").json()
    assert shown["crawl"]["concurrency"] == 3
    assert shown["crawl"]["niceness"] == 5
    assert api.http.post(f"/crawls/{crawl_id}/abort").json()["changed"] == 2
    assert api.http.get(f"/crawls/{crawl_id}").json()["parked"] == 2
    assert api.http.post(f"/crawls/{crawl_id}/resume").json()["changed"] == 2
    assert api.http.get("/crawls/999").status_code == 404
    assert api.http.get("/hosts").json() == {"hosts": [], "next": None}


def test_a_crawl_needs_seeds_and_good_patterns(api: Api) -> None:
    assert api.http.post("/crawls", json={"seeds": []}).status_code == 400
    bad = api.http.post("/crawls", json={"seeds": ["http://x.example/"], "accept": ["("]})
    assert bad.status_code == 400
    assert "regular expression" in bad.json()["detail"]
    assert api.http.post("/crawls", json={"seeds": ["not a url"]}).status_code == 400
