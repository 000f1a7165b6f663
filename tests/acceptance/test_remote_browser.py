"""A browser crawl fetched by remote pipelines: only the pipeline whose hello says
``browser`` takes its pages, renders them (sub-requests paced by the tracker), finds the
links JavaScript makes at their true depth, and archives every request in its own WARC."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.acceptance.test_pipelines import create_pipeline, serve
from tests.acceptance.test_remote_crawl import crawler, settled
from tests.support import pg, site_crawl
from tests.support.js_site import CLICK, JS_LINKS, SUBRESOURCES, JsSite, need_chromium
from tests.support.procs import Procs, running, wait_for
from trawl.crawl import operations
from trawl.crawl.browser.chromium import ENV
from trawl.crawl.options import Options
from trawl.crawl.rules import make_rule
from trawl.store.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    yield from running(tmp_path / "procs")


def _uris(warcs: Path) -> set[str]:
    found = set()
    for path in warcs.glob("*.warc.gz"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in ("response", "revisit"):
                    found.add(record.rec_headers.get_header("WARC-Target-URI"))
    return found


def test_only_the_browser_pipeline_renders_a_browser_crawl(
    sqlite_url: str, tmp_path: Path, procs: Procs
) -> None:
    need_chromium()
    port = pg.free_port()
    tokens = {name: create_pipeline(procs, sqlite_url, name) for name in ("seer", "blind")}
    options = Options(browser=True, delay=0.1, timeout=10.0, warc="js.warc.gz")
    with JsSite() as site:
        crawl_id = site_crawl.create(sqlite_url, None, seeds=(site.url("/"),), options=options)
        with Store(sqlite_url) as store:
            operations.edit_rules(store, crawl_id, add=[make_rule("custom_js", r":\d+/$", CLICK)])
        serve(procs, sqlite_url, port)
        procs.env[ENV] = "/nonexistent/chromium"  # this one has no browser to offer
        blind = crawler(procs, port, "blind", tokens["blind"], tmp_path / "warc-blind")
        del procs.env[ENV]
        seer = crawler(procs, port, "seer", tokens["seer"], tmp_path / "warc-seer")
        wait_for(lambda: settled(sqlite_url, crawl_id), "the crawl to finish", timeout=180)
        found = site_crawl.fetched(site_crawl.pages(sqlite_url, crawl_id))
        sub = {site.url(p) for p in SUBRESOURCES}
        depths = {p: found.get(site.url(p)) for p in JS_LINKS}
        with Store(sqlite_url) as store, store.read():
            payloads = {url for url, _ in store.crawls.payloads(crawl_id).values()}
    for worker in (blind, seer):
        worker.send(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, worker.describe()
        assert "Traceback" not in worker.stderr(), worker.describe()
    assert depths == {"/js-inserted": 1, "/from-json": 1, "/behind-button": 1, "/deep-js": 2}
    assert sub <= _uris(tmp_path / "warc-seer"), "every sub-request in the pipeline's WARC"
    assert not _uris(tmp_path / "warc-blind"), "a pipeline without a browser fetched nothing"
    assert site.url("/links.json") in payloads, "sub-request payloads are known for dedup"
