"""GET /metrics: the database's gauges in Prometheus text format, read at most every few
seconds however often it is scraped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import make_tokens
from tests.integration.helpers import claim_one, commit_one, failure, item
from trawl.server.app import create_app
from trawl.store.store import Store

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(http: TestClient) -> Samples:  # type: ignore[type-arg]
    answer = http.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


@pytest.fixture
def client(db_url: str, request: pytest.FixtureRequest) -> Iterator[TestClient]:  # type: ignore[type-arg]
    tokens = make_tokens(db_url)
    cache = getattr(request, "param", 0.0)
    with TestClient(create_app(db_url, token_cache=0.0, metrics_cache=cache)) as http:
        http.headers["Authorization"] = f"Bearer {tokens['read']}"
        yield http


def test_the_database_gauges(client: TestClient, db_url: str) -> None:  # type: ignore[type-arg]
    with Store(db_url) as store:
        store.add_items([item(f"sku:{n}", "product") for n in range(3)])
        commit_one(store, failure(claim_one(store), "boom"))
        store.consumers.position("indexer", store.clock())
    got = _scrape(client)
    assert got[("trawl_jobs", (("state", "queued"), ("task", "price")))] == 2
    assert got[("trawl_jobs", (("state", "failed"), ("task", "price")))] == 1
    assert got[("trawl_jobs_due", (("task", "price"),))] == 2
    assert got[("trawl_oldest_due_seconds", (("task", "price"),))] >= 0
    assert got[("trawl_failures_unhandled", (("task", "price"),))] == 1
    assert got[("trawl_task_paused", (("task", "price"),))] == 0
    assert got[("trawl_journal_consumer_lag", (("consumer", "indexer"),))] > 0
    assert got[("trawl_hosts_throttled", ())] == 0
    # bounded labels: tasks, states and consumer names only, never an item
    assert not any("sku:" in value for _, labels in got for _, value in labels)


@pytest.mark.parametrize("client", [3600.0], indirect=True)
def test_scrapes_reuse_the_last_reading(client: TestClient, db_url: str) -> None:  # type: ignore[type-arg]
    first = _scrape(client)
    with Store(db_url) as store:
        store.add_items([item("late:1", "product")])
    assert _scrape(client) == first  # within the cache time: no new queries


def test_a_scrape_after_the_cache_time_reads_again(client: TestClient, db_url: str) -> None:  # type: ignore[type-arg]
    before = _scrape(client).get(("trawl_jobs", (("state", "queued"), ("task", "price"))), 0)
    with Store(db_url) as store:
        store.add_items([item("late:1", "product")])
    after = _scrape(client)[("trawl_jobs", (("state", "queued"), ("task", "price")))]
    assert after == before + 1
