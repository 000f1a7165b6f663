"""Tasks, worklists, failures and limits through the API, against what the engine did."""

from __future__ import annotations

from tests.api.conftest import Api
from tests.integration.helpers import claim_one, commit_one, failure, success
from trawl.store.store import Store


def _add(api: Api, n: int, tag: str = "product") -> list[str]:
    ids = [f"w:{i:03}" for i in range(n)]
    assert api.http.post(
        "/items", json={"items": [{"id": i, "tags": [tag]} for i in ids]}
    ).is_success
    return ids


def test_worklist_pages_in_claim_order(api: Api) -> None:
    _add(api, 30)
    with Store(api.url) as store:
        claimed = claim_one(store, "price")  # running: not in the worklist until its lease ends
    seen, cursor = [], None
    while True:
        params = {"task": "price", "limit": 7} | ({"cursor": cursor} if cursor else {})
        page = api.http.get("/due", params=params)
        assert page.status_code == 200, page.text
        seen += page.json()["jobs"]
        cursor = page.json()["next"]
        if cursor is None:
            break
    assert len(seen) == 29
    assert claimed.item_id not in {j["item_id"] for j in seen}
    keys = [(j["niceness"], j["ever_run"], j["due_at"], j["job_id"]) for j in seen]
    assert keys == sorted(keys)
    by_tag = api.http.get("/due", params={"tag": "product", "limit": 1000}).json()["jobs"]
    assert len(by_tag) == 29 + 30  # both tasks' jobs of the tagged items
    assert api.http.get("/due").status_code == 400
    assert api.http.get("/due", params={"task": "nope"}).status_code == 404


def test_tasks_pause_resume_and_expire(api: Api) -> None:
    _add(api, 3)
    tasks = {t["task"]: t for t in api.http.get("/tasks").json()["tasks"]}
    assert tasks["price"]["queued"] == 3
    assert api.http.post("/tasks/price/pause", json={"reason": "site down"}).is_success
    assert api.http.get("/tasks/price").json()["paused"] == "site down"
    assert api.http.post("/tasks/price/resume").is_success
    assert api.http.get("/tasks/price").json()["paused"] is None
    with Store(api.url) as store:
        commit_one(store, success(claim_one(store, "price"), {"p": 1}))
    expired = api.http.post("/tasks/price/expire", json={"item": "w:000"})
    assert expired.json() == {"count": 1}
    assert api.http.post("/tasks/nope/pause", json={}).status_code == 404
    both = api.http.post("/tasks/price/expire", json={"item": "w:000", "tag": "product"})
    assert both.status_code == 400


def test_failures_list_show_retry_handle(api: Api) -> None:
    _add(api, 3)
    with Store(api.url) as store:
        for _ in range(3):
            commit_one(store, failure(claim_one(store, "price"), "boom"))
    listed = api.http.get("/failures", params={"task": "price", "limit": 2}).json()
    assert len(listed["failures"]) == 2
    assert listed["next"]
    rest = api.http.get("/failures", params={"task": "price", "cursor": listed["next"]}).json()
    ids = [f["id"] for f in listed["failures"] + rest["failures"]]
    assert ids == sorted(ids, reverse=True)
    assert len(ids) == 3
    one = api.http.get(f"/failures/{ids[0]}").json()
    assert one["message"] == "boom"
    assert one["traceback"] == "tb"
    assert api.http.get("/failures/999999").status_code == 404
    assert api.http.post("/failures/handle", json={"ids": [ids[0]]}).json() == {"count": 1}
    # every failed job of the task, the one whose failure was handled too (as the CLI does)
    assert api.http.post("/failures/retry", json={"task": "price"}).json() == {"count": 3}
    assert api.http.get("/failures", params={"task": "price"}).json()["failures"] == []
    handled = api.http.get("/failures", params={"task": "price", "handled": True}).json()
    assert len(handled["failures"]) == 3


def test_limits_are_listed(api: Api) -> None:
    assert api.http.get("/limits").json() == {"limits": []}
