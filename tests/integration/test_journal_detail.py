"""Journal entries say what changed, so a consumer needs no second read: a done job's
result, a failure's error, a data update's merge patch, and the crawl operations."""

from __future__ import annotations

from typing import Any

from tests.integration.helpers import claim_one, commit_one, failure, item, success, task
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.crawl.rules import make_rule
from trawl.model import effects as fx
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store


def _last(store: Store, kind: str) -> Any:
    found = [e for e in store.journal(0, 10_000) if e.kind == kind]
    assert found, f"no {kind} entry"
    return found[-1]


def test_a_done_job_carries_its_result_version_and_change(store: Store) -> None:
    store.register_tasks([task(version="7")])
    store.add_items([item("sku:1", "product")])
    commit_one(store, success(claim_one(store), {"price": 12.5, "n": [1, 2]}, version="7"))
    entry = _last(store, "job.done")
    assert (entry.item_id, entry.task) == ("sku:1", "price")
    assert entry.detail == {
        "attempt": 1,
        "version": "7",
        "changed": True,
        "result": {"price": 12.5, "n": [1, 2]},
    }


def test_a_failed_job_carries_its_error(store: Store) -> None:
    store.register_tasks([task()])
    store.add_items([item("sku:1", "product")])
    commit_one(store, failure(claim_one(store), "no price on the page"))
    entry = _last(store, "job.failed")
    assert entry.detail == {
        "attempt": 1,
        "error_type": "RuntimeError",
        "message": "no price on the page",
        "retry": True,
    }


def test_a_data_update_carries_its_merge_patch(store: Store) -> None:
    store.register_tasks([task()])
    store.add_items([item("sku:1", "product", keep=1, drop=2, nested={"a": 1, "b": 2})])

    def change(data: dict[str, Any]) -> dict[str, Any]:
        data.pop("drop")
        data["nested"]["b"] = 3  # changes what it was given: the patch is still right
        return data | {"new": "x"}

    job = claim_one(store)
    commit_one(store, success(job, {}, effects=(fx.UpdateData(id="sku:1", fn=change),)))
    assert _last(store, "item.updated").detail == {
        "patch": {"drop": None, "nested": {"b": 3}, "new": "x"}
    }


def test_crawl_operations_are_journaled(store: Store) -> None:
    operations.register(store, make_app().get(FETCH_TASK).info())
    spec = CrawlSpec(seeds=("http://a.test/",), depth=2, options=Options(robots=False))
    crawl = operations.create(store, spec)
    operations.set_concurrency(store, crawl, 3)
    operations.set_niceness(store, crawl, 5)
    operations.edit_rules(store, crawl, add=[make_rule("skip", "/private/")], note="no private")
    operations.abort(store, crawl)
    operations.resume(store, crawl)
    kinds = {e.kind: e.detail for e in store.journal(0, 10_000) if e.kind.startswith("crawl.")}
    assert kinds["crawl.created"] == {"crawl": crawl, "seeds": 1, "depth": 2}
    assert kinds["crawl.concurrency"] == {"crawl": crawl, "before": 8, "after": 3}
    assert kinds["crawl.niceness"] == {"crawl": crawl, "before": 0, "after": 5}
    rules = kinds["crawl.rules"]
    assert (rules["crawl"], rules["version"], rules["removed"]) == (crawl, 2, [])
    assert rules["note"] == "no private"
    assert len(rules["added"]) == 1
    assert kinds["crawl.aborted"] == {"crawl": crawl, "parked": 1}
    assert kinds["crawl.resumed"] == {"crawl": crawl, "due": 1}
