"""Link extraction on hostile input: no pattern backtracks, and caps hold and are reported."""

from __future__ import annotations

import gzip
import time
import zlib

import brotli
import pytest

from trawl.crawl import client
from trawl.crawl.client import DECODE_LIMIT
from trawl.crawl.extract import MAX_CSS, css_links, html_links


def _seconds(fn: object, *args: object) -> float:
    """The best of three runs: a ratio of two such times is what the tests compare."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        fn(*args)  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best


def _growth(unit: str) -> float:
    """How much longer 8x the bait takes: ~8 when linear, ~64 when quadratic."""
    small, large = unit * 20_000, unit * 160_000
    return _seconds(css_links, large, "http://h/") / max(
        _seconds(css_links, small, "http://h/"), 1e-6
    )


@pytest.mark.timing  # a ratio of two timings: beside another test, noise can reach it
def test_repeated_open_url_calls_scan_in_linear_time() -> None:
    # The old pattern took quadratic time here: each "url(" scanned to the end of the text.
    small = "a{background:" + "url(" * 20_000
    large = "a{background:" + "url(" * 80_000
    ratio = _seconds(css_links, large, "http://h/") / max(
        _seconds(css_links, small, "http://h/"), 1e-6
    )
    assert ratio < 12  # 4x the text: linear is ~4x, quadratic ~16x


def test_unclosed_quotes_and_parentheses_find_nothing() -> None:
    for bait in ('url("' * 100_000, "url('" * 100_000, "url(a" * 100_000):
        assert css_links(bait, "http://h/").urls == []


@pytest.mark.timing
def test_every_bait_scales_linearly() -> None:
    for unit in ('url("', "url('", "url(a", "@import '", 'url("a', "url( "):
        assert _growth(unit) < 30, unit


def test_style_blocks_past_the_css_budget_are_cut_and_say_so() -> None:
    block = "a{background:url(x.png)}" + " " * MAX_CSS + "b{background:url(late.png)}"
    links = html_links(f"<style>{block}</style>".encode(), "http://h/")
    assert links.urls == ["http://h/x.png"]
    assert links.cut == "css"


def test_outlinks_are_capped_per_page_and_the_cut_is_reported() -> None:
    body = "".join(f'<a href="/p{n}">x</a>' for n in range(500)).encode()
    links = html_links(body, "http://h/", max_links=100)
    assert len(links.urls) == 100
    assert links.urls[:2] == ["http://h/p0", "http://h/p1"]
    assert links.cut == "links"
    assert html_links(body, "http://h/").cut is None


def test_repeated_links_do_not_count_against_the_cap() -> None:
    body = b'<a href="/same">x</a>' * 1000 + b'<a href="/other">y</a>'
    assert html_links(body, "http://h/", max_links=2).urls == ["http://h/same", "http://h/other"]


def test_quoted_and_unquoted_css_urls() -> None:
    css = """a{b:url( "q%201.png" )} c{d:url('s.png')} e{f:url(u.png)} g{h:URL(up.png)}"""
    assert css_links(css, "http://h/").urls == [
        "http://h/q%201.png",
        "http://h/s.png",
        "http://h/u.png",
        "http://h/up.png",
    ]


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_decompression_bombs_stop_at_the_decode_limit(coding: str) -> None:
    bomb = _compress(b"\0" * (3 * DECODE_LIMIT), coding)
    assert len(bomb) < 3 * DECODE_LIMIT // 200  # small on the wire
    assert len(client._decode(bomb, coding)) == DECODE_LIMIT


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_corrupt_body_decodes_to_nothing(coding: str) -> None:
    assert client._decode(b"\x1f\x8bnot really compressed", coding) == b""


def _compress(data: bytes, coding: str) -> bytes:
    if coding == "br":
        return bytes(brotli.compress(data, quality=1))
    if coding == "gzip":
        return gzip.compress(data, compresslevel=1)
    return zlib.compress(data, 1)
