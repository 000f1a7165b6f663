"""Items through the API: bulk add with the CLI's checks, reads through aliases and ids with
slashes, merge patches, and atomic edits."""

from __future__ import annotations

from urllib.parse import quote

from tests.api.conftest import Api


def _path(item_id: str) -> str:
    return "/items/" + quote(item_id, safe="")


def test_add_then_read_through_an_id_with_slashes(api: Api) -> None:
    url_id = "url:https://a.example/x?y=1#z"
    answer = api.http.post(
        "/items",
        json={"items": [{"id": url_id, "tags": ["product"], "data": {"n": 1}}, {"id": "sku:2"}]},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"created": [url_id, "sku:2"], "existing": 0}
    again = api.http.post("/items", json={"items": [{"id": "sku:2"}]})
    assert again.json() == {"created": [], "existing": 1}
    item = api.http.get(_path(url_id)).json()
    assert item["id"] == url_id
    assert item["data"] == {"n": 1}
    assert item["tags"] == {"product": None}
    assert sorted(j["task"] for j in item["jobs"]) == ["price", "stock"]


def test_bad_items_are_refused_whole_naming_the_line(api: Api) -> None:
    answer = api.http.post(
        "/items", json={"items": [{"id": "ok:1"}, {"id": "bad:1", "tags": [["a", 1]]}]}
    )
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("application/problem+json")
    problem = answer.json()
    assert problem["status"] == 400
    assert "items[1]" in problem["detail"]
    assert api.http.get(_path("ok:1")).status_code == 404  # nothing was half-written
    unknown = api.http.post("/items", json={"items": [{"id": "x", "colour": "red"}]})
    assert unknown.status_code == 400
    assert "colour" in unknown.text
    empty = api.http.post("/items", json={"items": [{"id": ""}]})
    assert empty.status_code == 400
    assert "empty" in empty.json()["detail"]


def test_missing_item_is_a_404_problem(api: Api) -> None:
    answer = api.http.get(_path("nope:1"))
    assert answer.status_code == 404
    assert answer.json()["type"].endswith("/not-found")
    assert "nope:1" in answer.json()["detail"]


def test_merge_patch_changes_data_and_null_removes(api: Api) -> None:
    api.http.post("/items", json={"items": [{"id": "p:1", "data": {"a": 1, "b": {"c": 2}}}]})
    answer = api.http.patch(_path("p:1"), json={"a": None, "b": {"d": 3}, "e": "x"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"] == {"b": {"c": 2, "d": 3}, "e": "x"}


def test_edits_apply_all_or_nothing(api: Api) -> None:
    api.http.post("/items", json={"items": [{"id": "e:1"}, {"id": "e:2", "data": {"k": 2}}]})
    ok = api.http.post(
        "/edits",
        json={
            "edits": [
                {"op": "add_alias", "id": "e:1", "alias": "alias:1"},
                {"op": "add_tags", "id": "alias:1", "tags": {"colour": "red"}},
                {"op": "rename", "id": "e:1", "to": "e:one"},
                {"op": "merge", "into": "e:one", "source": "e:2"},
            ]
        },
    )
    assert ok.status_code == 200, ok.text
    merged = api.http.get(_path("e:2")).json()  # the merged item's id resolves to the target
    assert merged["id"] == "e:one"
    assert merged["data"] == {"k": 2}
    assert merged["tags"] == {"colour": "red"}
    assert set(merged["aliases"]) >= {"e:1", "e:one", "e:2", "alias:1"}
    bad = api.http.post(
        "/edits",
        json={
            "edits": [
                {"op": "patch_data", "id": "e:one", "patch": {"k": 3}},
                {"op": "rename", "id": "missing:9", "to": "x"},
            ]
        },
    )
    assert bad.status_code == 404, bad.text
    assert api.http.get(_path("e:one")).json()["data"] == {"k": 2}  # the first edit undone
    unknown = api.http.post("/edits", json={"edits": [{"op": "explode", "id": "e:one"}]})
    assert unknown.status_code == 400


def test_delete_and_list_by_tag_in_pages(api: Api) -> None:
    ids = [f"t:{n:03}" for n in range(25)]
    api.http.post("/items", json={"items": [{"id": i, "tags": ["batch"]} for i in ids]})
    seen, cursor = [], None
    while True:
        params = {"tag": "batch", "limit": 10} | ({"cursor": cursor} if cursor else {})
        page = api.http.get("/items", params=params).json()
        seen += page["items"]
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == ids
    assert api.http.delete(_path("t:000")).status_code == 204
    assert api.http.get(_path("t:000")).status_code == 404
    bad = api.http.get("/items", params={"tag": "batch", "cursor": "!!!"})
    assert bad.status_code == 400
    assert "cursor" in bad.json()["detail"]
    too_many = api.http.get("/items", params={"tag": "batch", "limit": 5000})
    assert too_many.status_code == 400
