"""The journal through the API: pages, one item's operations, named consumers that resume
after their last acknowledgement, and pruning that respects them."""

from __future__ import annotations

from urllib.parse import quote

from tests.api.conftest import Api


def test_pages_and_one_items_operations(api: Api) -> None:
    api.http.post("/items", json={"items": [{"id": f"j:{n}"} for n in range(5)]})
    api.http.patch("/items/" + quote("j:1", safe=""), json={"x": 1})
    first = api.http.get("/journal", params={"limit": 3}).json()
    assert len(first["entries"]) == 3
    rest = api.http.get("/journal", params={"after": first["next_after"]}).json()
    seqs = [e["seq"] for e in first["entries"] + rest["entries"]]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)
    mine = api.http.get("/journal", params={"item": "j:1"}).json()["entries"]
    assert {e["kind"] for e in mine} >= {"item.created", "item.updated"}
    assert {e["item_id"] for e in mine} == {"j:1"}


def test_a_consumer_resumes_after_its_last_ack(api: Api) -> None:
    api.http.post("/items", json={"items": [{"id": f"c:{n}"} for n in range(4)]})
    page = api.http.get("/consumers/indexer/entries", params={"limit": 2}).json()
    assert len(page["entries"]) == 2
    again = api.http.get("/consumers/indexer/entries", params={"limit": 2}).json()
    assert again == page  # nothing acknowledged: the same entries again
    ack = api.http.post("/consumers/indexer/ack", json={"seq": page["next_after"]})
    assert ack.json()["position"] == page["next_after"]
    after = api.http.get("/consumers/indexer/entries", params={"limit": 100}).json()
    assert after["entries"][0]["seq"] > page["next_after"]
    lag = {c["name"]: c["lag"] for c in api.http.get("/consumers").json()["consumers"]}
    assert lag["indexer"] == len(after["entries"])
    back = api.http.post("/consumers/indexer/ack", json={"seq": 0})
    assert back.json()["position"] == page["next_after"]  # never moves back
    past = api.http.post("/consumers/indexer/ack", json={"seq": 10**9})
    assert past.status_code == 400


def test_prune_refuses_to_drop_what_a_consumer_has_not_read(api: Api) -> None:
    api.http.post("/items", json={"items": [{"id": "old:1"}]})
    api.http.get("/consumers/slow/entries")  # registered at the beginning, acks nothing
    refused = api.http.post("/journal/prune", json={"before": "0s"})
    assert refused.status_code == 409
    assert refused.json()["type"].endswith("/conflict")
    assert "slow" in refused.json()["detail"]
    forced = api.http.post("/journal/prune", json={"before": "0s", "force": True})
    assert forced.status_code == 200
    assert forced.json()["deleted"] >= 1
    assert api.http.delete("/consumers/slow").status_code == 204
    assert api.http.delete("/consumers/slow").status_code == 404
