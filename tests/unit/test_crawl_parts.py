"""The crawler's pure parts: canonical URLs, link extraction, rules, robots.txt, Retry-After."""

from __future__ import annotations

import io
import threading

import pytest

from tests.support.crawl_rows import crawl_row
from trawl.crawl import extract, task
from trawl.crawl.blocks import retry_after
from trawl.crawl.client import Response
from trawl.crawl.extract import css_links, html_links
from trawl.crawl.options import Options, options_of
from trawl.crawl.robots import Robots
from trawl.crawl.rules import DEFAULT_USER_AGENT, Ruleset, make_rule
from trawl.crawl.urls import canonical
from trawl.crawl.warc import Exchange
from trawl.model.errors import InvalidInput


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://Example.ORG:80/a#frag", "http://example.org/a"),
        ("https://example.org:443", "https://example.org/"),
        ("http://example.org:8080/x?q=1#y", "http://example.org:8080/x?q=1"),
        ("mailto:someone@example.org", None),
        ("javascript:void(0)", None),
        ("http://exa mple.org/", None),
        ("http://user name@example.org/", None),
        # Spaces in a path or query are sent as %20, tabs and newlines dropped (WHATWG).
        (
            "http://example.org/My Report.pdf?q=a b#c d",
            "http://example.org/My%20Report.pdf?q=a%20b",
        ),
        ("http://example.org/a\tb\nc", "http://example.org/abc"),
        ("http://example.org/a%20b", "http://example.org/a%20b"),
    ],
)
def test_canonical(raw: str, expected: str | None) -> None:
    assert canonical(raw) == expected


def test_a_link_or_redirect_with_spaces_resolves_against_its_page() -> None:
    base = "http://h.example/docs/index.html"
    assert canonical("My Report.pdf", base) == "http://h.example/docs/My%20Report.pdf"
    assert canonical("/ok page?x=a b", base) == "http://h.example/ok%20page?x=a%20b"


def test_links_from_html_and_css_resolve_against_base_and_dedupe() -> None:
    html = b"""<html><head><base href="http://h.example/dir/"><link href="s.css" rel=stylesheet>
    <style>body { background: url('bg.png') }</style></head><body>
    <a href="a#x">a</a><a href="a#y">again</a><img src="/i.png" srcset="/i2.png 2x, i3.png 3x">
    <script src="//cdn.example/j.js"></script><iframe src="f.html"></iframe>
    <div style="background:url(d.png)"></div><a href="mailto:x@y">mail</a></body></html>"""
    assert html_links(html, "http://ignored/").urls == [
        "http://h.example/dir/s.css",
        "http://h.example/dir/bg.png",
        "http://h.example/dir/a",
        "http://h.example/i.png",
        "http://h.example/i2.png",
        "http://h.example/dir/i3.png",
        "http://cdn.example/j.js",
        "http://h.example/dir/f.html",
        "http://h.example/dir/d.png",
    ]
    css = "@import 'more.css'; a { background: url(\"x.gif\") } b { background: url(data:,) }"
    assert css_links(css, "http://h/c/").urls == ["http://h/c/x.gif", "http://h/c/more.css"]


def test_pages_share_a_thread_s_selector_engine_but_never_its_matches() -> None:
    """One CSS engine serves the pages a thread parses (setting one up cost more than a
    small page), so nothing of one page's matches may reach the next, and two threads
    never share one."""
    first = b'<base href="http://one.example/"><base href="http://two.example/"><a href=a>'
    assert html_links(first, "http://h/").urls == ["http://one.example/a"]  # the first base
    assert html_links(b"<p>no links</p>", "http://h/").urls == []
    assert html_links(b"<a href=b>", "http://h/x/").urls == ["http://h/x/b"]
    assert html_links(b"", "http://h/").urls == []

    engines: dict[str, object] = {}
    found: dict[str, list[list[str]]] = {}

    def parse(name: str) -> None:
        engines[name] = extract._selector()
        pages = (f"<a href=/{name}/{n}>".encode() for n in range(200))
        found[name] = [html_links(page, "http://h/").urls for page in pages]

    threads = [threading.Thread(target=parse, args=(name,)) for name in ("t1", "t2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name in ("t1", "t2"):
        assert found[name] == [[f"http://h/{name}/{n}"] for n in range(200)]
    assert engines["t1"] is not engines["t2"]
    assert extract._selector() is extract._selector()
    assert extract._selector() not in engines.values()


def test_last_matching_rule_wins_per_setting() -> None:
    rules = Ruleset(
        3,
        [
            make_rule("accept", r"example\.org"),
            make_rule("skip", r"\?sessionid="),
            make_rule("skip", r"\?sessionid=keep", False),
            make_rule("user_agent", "/special/", "special-bot/1"),
            make_rule("header", "", "X-A: 1"),
            make_rule("header", "/special/", "X-A: 2"),
        ],
    )
    assert rules.accepts("http://example.org/")
    assert not rules.accepts("http://other/")
    assert rules.settings("http://example.org/p?sessionid=1").skip
    assert not rules.settings("http://example.org/p?sessionid=keep").skip
    special = rules.settings("http://example.org/special/x")
    assert (special.user_agent, special.headers) == ("special-bot/1", {"X-A": "2"})
    plain = rules.settings("http://example.org/x")
    assert (plain.user_agent, plain.headers) == (DEFAULT_USER_AGENT, {"X-A": "1"})


def test_bad_rules_are_refused_with_a_reason() -> None:
    with pytest.raises(InvalidInput, match="not a regular expression"):
        make_rule("skip", "(")
    with pytest.raises(InvalidInput, match="unknown rule kind"):
        make_rule("reject-all", "x")


def test_robots_disallow_and_fractional_crawl_delay() -> None:
    robots = Robots(200, "User-agent: *\nDisallow: /private/\nCrawl-delay: 0.5\n")
    assert not robots.allowed("http://h/private/x", DEFAULT_USER_AGENT)
    assert robots.allowed("http://h/public", DEFAULT_USER_AGENT)
    assert robots.delay(DEFAULT_USER_AGENT) == 0.5
    assert Robots(404, "").allowed("http://h/private/x", DEFAULT_USER_AGENT)


def test_retry_after_seconds_dates_and_garbage() -> None:
    assert retry_after("7") == 7.0
    assert retry_after(None) == retry_after("soon") == 10.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert retry_after("999999") == 3600.0


def _page(body: bytes, **headers: str) -> Response:
    exchange = Exchange(
        url="http://h/",
        request_line="GET / HTTP/1.1",
        request_headers=[],
        status_line="200 OK",
        protocol="HTTP/1.1",
        response_headers=list(headers.items()),
        body=io.BytesIO(body),
        digest="sha1:X",
        date="2026-11-25T00:00:00Z",
    )
    return Response(
        exchange=exchange,
        status=200,
        headers={k.lower(): v for k, v in headers.items()},
        size=len(body),
        truncated=False,
        started=0.0,
        elapsed=0.0,
    )


@pytest.mark.parametrize(
    ("body", "headers", "inline"),
    [
        (b"<html><a href='/a'>a</a><a href='/b'>b</a></html>", {}, True),
        (b"<div>" * 300, {}, False),  # deep nesting: parsing it is not cheap
        (b"<a href='/x'>x</a>" * 150, {}, False),  # 300 tags
        (b"a{background:url(x.png)}" * 250, {}, False),
        (b"x" * (task.INLINE_BYTES + 1), {}, False),
        (b"<html></html>", {"Content-Encoding": "gzip"}, False),  # may inflate far
    ],
)
def test_only_small_plain_pages_are_parsed_on_the_event_loop(
    body: bytes, headers: dict[str, str], inline: bool
) -> None:
    page = _page(body, **headers)
    assert task._small(page) is inline
    assert page.exchange.body.read() == body, "the body is read from its start again"


def test_a_crawls_options_are_parsed_again_once_they_change() -> None:
    stored = Options(delay=0.5).to_json()
    first = options_of(crawl_row(7, stored))
    assert options_of(crawl_row(7, dict(stored))) is first  # unchanged: the parse is kept
    stored["delay"] = 2.0  # a row read after the options were edited, or edited in place
    assert options_of(crawl_row(7, stored)).delay == 2.0
    assert options_of(crawl_row(8, Options().to_json())).delay == 0.0  # crawls apart


@pytest.mark.parametrize(
    "charset",
    ["x-bogus-9", "base64", "zlib", "idna", "undefined", '"x-bogus"', ""],
)
def test_a_charset_python_cannot_read_falls_back_to_utf8(charset: str) -> None:
    """A page naming a charset Python does not know, or one of its codecs that is not a
    text encoding or cannot replace what it cannot read, is read as UTF-8: its links are
    found and the page does not fail (an unknown charset once failed every attempt)."""
    body = '<a href="/caf\u00e9">x</a>\xff'.encode("utf-8", errors="surrogateescape")
    resp = _page(body, **{"Content-Type": f"text/html; charset={charset}"})
    assert resp.text().startswith('<a href="/caf\u00e9">x</a>')
    assert html_links(resp.text().encode(), "http://h/").urls == ["http://h/caf\u00e9"]


def test_a_charset_python_knows_is_used() -> None:
    resp = _page(
        '<a href="/caf\u00e9">x</a>'.encode("latin-1"),
        **{"Content-Type": "text/html; charset=latin-1"},
    )
    assert resp.text() == '<a href="/caf\u00e9">x</a>'


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # Declared in a meta tag, as old pages do, and nowhere else.
        (b'<meta charset="iso-8859-1"><a href="/caf\xe9">', "/caf\u00e9"),
        (
            b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
            b'<a href="/\xe4\xe0">',
            "/\u0434\u0430",
        ),
        # Not declared, not UTF-8: read as browsers guess (windows-1252), not as U+FFFD.
        (b'<a href="/caf\xe9">', "/caf\u00e9"),
        # UTF-8, even cut short inside its last character.
        ('<a href="/caf\u00e9">'.encode() + "\u00e9".encode()[:1], "/caf\u00e9"),
        # A byte order mark says it all.
        (b"\xff\xfe" + '<a href="/caf\u00e9">'.encode("utf-16-le"), "/caf\u00e9"),
        # A meta tag naming UTF-16, found as ASCII bytes: the page is not UTF-16.
        (b'<meta charset="utf-16"><a href="/caf\xc3\xa9">', "/caf\u00e9"),
        (b'<meta charset="UTF-16LE"><a href="/caf\xc3\xa9">', "/caf\u00e9"),
    ],
)
def test_an_undeclared_charset_is_sniffed_as_browsers_do(body: bytes, expected: str) -> None:
    resp = _page(body, **{"Content-Type": "text/html"})
    links = html_links(resp.text().encode(), "http://h/").urls
    assert links == [f"http://h{expected}"]


@pytest.mark.parametrize(
    ("bom", "encoding"),
    [
        (b"\xef\xbb\xbf", "utf-8"),
        (b"\xff\xfe", "utf-16-le"),
        (b"\xfe\xff", "utf-16-be"),
    ],
)
def test_a_byte_order_mark_wins_over_the_header(bom: bytes, encoding: str) -> None:
    """As in browsers (the HTML standard's encoding sniffing): a server's default charset
    is often wrong for a file that says what it is."""
    body = bom + '<a href="/caf\u00e9">x</a>'.encode(encoding)
    resp = _page(body, **{"Content-Type": "text/html; charset=iso-8859-1"})
    assert resp.text() == '<a href="/caf\u00e9">x</a>'


def test_the_header_wins_over_a_meta_tag() -> None:
    body = b'<meta charset="windows-1251"><a href="/caf\xe9">'
    resp = _page(body, **{"Content-Type": "text/html; charset=latin-1"})
    assert html_links(resp.text().encode(), "http://h/").urls == ["http://h/caf\u00e9"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0; url=/next", ["http://h/next"]),
        ("5;URL='/a b'", ["http://h/a%20b"]),
        (" 7 , Url = /q ", ["http://h/q"]),
        ('.5; url="http://other.example/x"', ["http://other.example/x"]),
        ("0; /bare", ["http://h/bare"]),
        ("30", []),  # a reload, no target
        ("soon; url=/x", []),  # no delay first: not a refresh (the HTML standard's parse)
        ("", []),
    ],
)
def test_a_meta_refresh_target_is_a_link(content: str, expected: list[str]) -> None:
    html = f"<meta http-equiv=Refresh content={content!r}>".encode()
    assert html_links(html, "http://h/d/").urls == expected


def test_other_meta_tags_are_not_links() -> None:
    html = b'<meta name=refresh content="0; url=/no"><meta http-equiv=content-type content="0;/x">'
    assert html_links(html, "http://h/").urls == []
