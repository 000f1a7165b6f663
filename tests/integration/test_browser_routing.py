"""Browser pages go only to fetchers with a browser: a remote pipeline says so in its
hello (the ``browser`` capability); a ``--browser`` crawl is routed only to such
pipelines, and a page a render rule sends to the browser is deferred (holding nothing) when
a pipeline without one begins it."""

from __future__ import annotations

import random

import pytest

from tests.integration.helpers import fetch_routing
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.crawl.politeness import NO_BROWSER_RETRY, Gate, block_host, pace_host
from trawl.crawl.remote import decode_fetched
from trawl.crawl.rules import make_rule
from trawl.crawl.urls import page_id
from trawl.model import wire
from trawl.model.errors import InvalidInput
from trawl.model.states import Outcome
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

SEED = "http://a.test/"
APP = "http://a.test/app/x"


def _crawl(store: Store, options: Options) -> int:
    operations.register(store, make_app().get(FETCH_TASK).info())
    return operations.create(store, CrawlSpec(seeds=(SEED,), depth=2, options=options))


def test_a_fetcher_without_a_browser_is_deferred_from_browser_pages(store: Store) -> None:
    crawl_id = _crawl(store, Options(robots=False))
    operations.edit_rules(store, crawl_id, add=[make_rule("render", "/app/", "browser")])
    gate = Gate(random.Random(1))
    plain = gate.begin(store, crawl_id, SEED, page_id(crawl_id, SEED), 1, [], browser=False)
    assert plain.action == "fetch", "a page no rule renders goes to any fetcher"
    app_id = page_id(crawl_id, APP)
    refused = gate.begin(store, crawl_id, APP, app_id, 1, [], browser=False)
    assert refused.action == "defer"
    assert refused.until == pytest.approx(store.clock() + NO_BROWSER_RETRY)
    # Deferred before the reservation: the page took no slot and moved no start.
    taken = gate.begin(store, crawl_id, APP, app_id, 2, [(page_id(crawl_id, SEED), 1)])
    assert taken.action == "fetch"


def test_a_browser_crawl_is_routed_only_to_pipelines_with_a_browser(store: Store) -> None:
    plain_id = _crawl(store, Options())
    browser_id = operations.create(
        store, CrawlSpec(seeds=("http://b.test/",), options=Options(browser=True))
    )
    crawls = [operations.get(store, plain_id), operations.get(store, browser_id)]
    assert fetch_routing([]).crawls(crawls) == [plain_id]
    assert sorted(fetch_routing(["browser"]).crawls(crawls)) == [plain_id, browser_id]


def test_a_pipeline_cannot_record_payloads_of_another_crawl() -> None:
    record = {
        "crawl_id": 1,
        "url": SEED,
        "attempt": 1,
        "ruleset": 1,
        "host": "a.test",
        "started_at": 0.0,
        "elapsed": 0.1,
        "outcome": "done",
        "status_code": 200,
        "location": None,
        "content_type": "text/html",
        "size": 10,
        "outlinks": 0,
        "outlinks_cut": None,
        "error": None,
        "digest": "sha1:X",
        "warc_file": "w.warc.gz",
        "warc_offset": 0,
        "warc_length": 10,
        "subrequests": 2,
    }
    attempt = wire.Attempt(
        job_id=1,
        item_id=page_id(1, SEED),
        task=FETCH_TASK,
        attempt=1,
        outcome=Outcome.SUCCESS,
        version="1",
    )
    body = {"item_id": page_id(1, SEED), "attempt": 1, "record": record}
    ok = decode_fetched(body | {"subpayloads": [[1, "sha1:Y", SEED + "a.js", "d"]]}, attempt)
    assert ok.subpayloads == ((1, "sha1:Y", SEED + "a.js", "d"),)
    with pytest.raises(InvalidInput, match="payload of another crawl"):
        decode_fetched(body | {"subpayloads": [[2, "sha1:Y", SEED + "a.js", "d"]]}, attempt)


def test_sub_requests_take_the_hosts_next_start_and_none_while_it_is_blocked(
    store: Store,
) -> None:
    now = store.clock()
    first = pace_host(store, "a.test", 0.5)
    second = pace_host(store, "a.test", 0.5)
    assert first == now
    assert second is not None
    assert second >= now + 0.5  # a page's requests share the host's spacing
    block_host(store, "a.test", now + 30)
    assert pace_host(store, "a.test", 0.5) is None
