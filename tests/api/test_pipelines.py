"""Remote pipelines through the HTTP API: the same rows the CLI manages, and operator
commands that reach a connected pipeline's session at once."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.api.conftest import Api, make_tokens, serving
from tests.live.helpers import run
from tests.pipelines.conftest import Tracker, join


def test_create_show_list_change_rotate_and_delete(api: Api) -> None:
    made = api.http.post("/pipelines", json={"id": "p1", "tags": ["eu"], "slots": 8})
    assert made.status_code == 201, made.text
    assert made.json()["id"] == "p1"
    assert len(made.json()["token"]) >= 40
    api.http.post("/pipelines", json={"id": "p2", "match_only": True, "tags": ["us"]})
    shown = api.http.get("/pipelines/p1").json()
    assert (shown["tags"], shown["slots"], shown["connected"]) == (["eu"], 8, False)
    assert "token" not in shown
    first = api.http.get("/pipelines", params={"limit": 1}).json()
    assert [p["id"] for p in first["pipelines"]] == ["p1"]
    second = api.http.get("/pipelines", params={"cursor": first["next"]}).json()
    assert [p["id"] for p in second["pipelines"]] == ["p2"]
    changed = api.http.patch(
        "/pipelines/p1", json={"add_tags": ["us"], "remove_tags": ["eu"], "slots": 2}
    ).json()
    assert (changed["tags"], changed["slots"]) == (["us"], 2)
    assert api.http.post("/pipelines/p1/drain").json()["draining"] is True
    assert api.http.post("/pipelines/p1/undrain").json()["draining"] is False
    rotated = api.http.post("/pipelines/p1/token").json()
    assert rotated["token"] != made.json()["token"]
    assert api.http.delete("/pipelines/p1").status_code == 204
    assert api.http.get("/pipelines/p1").status_code == 404


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"id": "has space"}, "pipeline id 'has space'"),
        ({"id": "p", "slots": 0}, "slots"),
        ({"id": "p", "tags": [""]}, "tags"),
        ({"id": "p", "token": "mine"}, "token"),
    ],
)
def test_bad_pipelines_are_refused_naming_what_was_wrong(api: Api, body: dict, says: str) -> None:
    answer = api.http.post("/pipelines", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert says in answer.json()["detail"]
    assert api.http.get("/pipelines").json()["pipelines"] == []


def test_a_taken_id_is_a_conflict_and_unknown_ones_are_not_found(api: Api) -> None:
    api.http.post("/pipelines", json={"id": "p1"})
    assert api.http.post("/pipelines", json={"id": "p1"}).status_code == 409
    for method, path in [
        ("PATCH", "/pipelines/nope"),
        ("POST", "/pipelines/nope/drain"),
        ("POST", "/pipelines/nope/disconnect"),
        ("POST", "/pipelines/nope/token"),
        ("DELETE", "/pipelines/nope"),
    ]:
        answer = api.http.request(method, path, json={} if method == "PATCH" else None)
        assert answer.status_code == 404, (method, path, answer.text)
        assert "no pipeline is named 'nope'" in answer.json()["detail"]


def test_scopes_guard_what_pipelines_may_be_told(api: Api) -> None:
    api.http.post("/pipelines", json={"id": "p1"})
    read, write = api.as_("read"), api.as_("write")
    assert api.http.get("/pipelines", headers=read).status_code == 200
    assert api.http.post("/pipelines/p1/drain", headers=read).status_code == 403
    assert api.http.post("/pipelines/p1/drain", headers=write).status_code == 200
    assert api.http.post("/pipelines", json={"id": "p2"}, headers=write).status_code == 403
    assert api.http.post("/pipelines/p1/token", headers=write).status_code == 403


@pytest.fixture
def slow_watch(db_url: str) -> Tracker:
    """A tracker whose sessions never re-read their rows by themselves: what reaches them
    reaches them through the API's notice."""
    tokens = make_tokens(db_url)
    with serving(db_url, token_cache=0.0, pipeline_watch=3600.0) as base:
        tracker = Tracker(base=base, db=db_url)
        tracker.api_token = tokens["admin"]  # type: ignore[attr-defined]
        yield tracker


def test_operator_commands_reach_a_connected_session_at_once(slow_watch: Tracker) -> None:
    tracker = slow_watch
    tracker.pipeline("p1", tags=("eu",))
    admin = {"Authorization": f"Bearer {tracker.api_token}"}  # type: ignore[attr-defined]
    tasks = [
        {"name": "plain", "version": "1", "timeout": 60},
        {"name": "euwork", "version": "1", "timeout": 60, "pipeline_tag": "eu"},
    ]

    async def main() -> None:
        raw, welcome = await join(tracker, "p1", tasks=tasks)
        assert welcome["tasks"] == ["plain", "euwork"]
        async with httpx.AsyncClient(base_url=tracker.base, headers=admin) as http:
            assert (await http.get("/pipelines/p1")).json()["connected"] is True
            await http.patch("/pipelines/p1", json={"remove_tags": ["eu"]})
            assert (await raw.advisory("routing", timeout=5))["payload"]["tasks"] == ["plain"]
            await http.post("/pipelines/p1/drain")
            await raw.advisory("drain", timeout=5)
            told = (await http.post("/pipelines/p1/disconnect")).json()
            assert told == {"id": "p1", "was_connected": True}
            assert "operator" in (await raw.advisory("disconnect", timeout=5))["payload"]["reason"]
            with pytest.raises(ConnectionClosed):
                await raw.recv(timeout=5)
            await asyncio.sleep(0.2)
            gone = (await http.post("/pipelines/p1/disconnect")).json()
            assert gone["was_connected"] is False

    run(main)


def test_pinning_a_pipeline_to_a_crawl(api: Api) -> None:
    api.http.post("/pipelines", json={"id": "p1"})
    crawl = api.http.post("/crawls", json={"seeds": ["http://a.invalid/"]})
    assert crawl.status_code == 201, crawl.text
    crawl_id = crawl.json()["crawl"]["id"]
    pinned = api.http.post("/pipelines/p1/pin", json={"crawl": crawl_id, "until": "forever"})
    assert pinned.status_code == 200, pinned.text
    assert (pinned.json()["crawl"], pinned.json()["crawl_lock"]) == (crawl_id, "forever")
    assert api.http.post("/pipelines/p1/pin", json={"crawl": 999}).status_code == 404
    bad = api.http.post("/pipelines/p1/pin", json={"crawl": crawl_id, "until": "later"})
    assert bad.status_code == 400
    unpinned = api.http.delete("/pipelines/p1/pin").json()
    assert (unpinned["crawl"], unpinned["crawl_lock"]) == (None, None)
    read = api.http.post("/pipelines/p1/pin", json={"crawl": crawl_id}, headers=api.as_("read"))
    assert read.status_code == 403


def test_a_rules_change_is_pushed_to_connected_pipelines(slow_watch: Tracker) -> None:
    tracker = slow_watch
    tracker.pipeline("p1")
    admin = {"Authorization": f"Bearer {tracker.api_token}"}  # type: ignore[attr-defined]

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        async with httpx.AsyncClient(base_url=tracker.base, headers=admin) as http:
            made = await http.post("/crawls", json={"seeds": ["http://a.invalid/"]})
            crawl_id = made.json()["crawl"]["id"]
            edit = {"add": [{"kind": "skip", "match": "/private/"}]}
            changed = await http.post(f"/crawls/{crawl_id}/rules", json=edit)
            assert changed.status_code == 200, changed.text
            version = changed.json()["version"]
        told = await raw.advisory("rules", timeout=5)
        assert told["payload"] == {"crawl": crawl_id, "version": version}
        await raw.ws.close()

    run(main)
