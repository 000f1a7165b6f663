"""Links out of HTML and CSS: ``a``, ``link``, ``img``, ``script``, ``iframe``, ``srcset``,
a ``<meta http-equiv=refresh>`` target and CSS ``url()``, canonicalised and deduplicated in
document order.

Pages are hostile input. The CSS patterns cannot backtrack (possessive quantifiers, and an
unquoted ``url(`` stops at the next parenthesis or quote), so scanning is linear in the
text; the text scanned and the links kept per page are capped, and a cut is reported.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, LexborNode

from trawl.crawl.urls import canonical

HTML_TYPES = ("text/html", "application/xhtml+xml")
MAX_LINKS = 10_000  # outlinks kept per page
MAX_CSS = 2 << 20  # characters of CSS scanned per page (style blocks and attributes)
MAX_URL = 8192  # longer "URLs" in CSS are not URLs

_SELECTOR = (
    "a[href], area[href], link[href], img[src], img[srcset], script[src], iframe[src],"
    " frame[src], source[src], source[srcset], embed[src], video[src], audio[src],"
    " [style], style, meta[http-equiv][content]"
)
_ATTRIBUTES = ("href", "src")
_CSS_URL = re.compile(
    rf"""url\(\s*+(?:"([^"]{{0,{MAX_URL}}}+)"|'([^']{{0,{MAX_URL}}}+)'|([^'"()\s]{{1,{MAX_URL}}}+))\s*+\)""",
    re.IGNORECASE,
)
_CSS_IMPORT = re.compile(
    rf"""@import\s++(?:"([^"]{{1,{MAX_URL}}}+)"|'([^']{{1,{MAX_URL}}}+)')""", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Links:
    """What a page links to, and whether a cap cut the scan short."""

    urls: list[str]
    cut: str | None = None  # why not every link was read ("links", "css")


def html_links(body: bytes, base: str, *, max_links: int = MAX_LINKS) -> Links:
    """Canonical URLs an HTML document links to or embeds."""
    root = LexborHTMLParser(body).root
    if root is None:
        return Links([])
    select = _selector().find
    for base_tag in select("base[href]", root)[:1]:
        base = canonical(base_tag.attributes.get("href") or "", base) or base
    budget = _Budget(MAX_CSS)
    nodes = select(_SELECTOR, root)
    return _collect((canonical(raw, base) for raw in _raw_links(nodes, budget)), max_links, budget)


_selectors = threading.local()


def _selector() -> LexborCSSSelector:
    """This thread's CSS selector engine, set up once rather than once a document, as
    ``tree.css()`` does (a CSS parser, a selector engine and their memory pools): a crawl
    of the 2,000-page demo site ran about 30,000 fewer instructions a page (callgrind),
    most of them in the allocator. Shared by the pages a thread parses, never by two
    threads (it is not thread-safe)."""
    selector: LexborCSSSelector | None = getattr(_selectors, "engine", None)
    if selector is None:
        # (selectolax's stub leaves out __init__'s "-> None")
        selector = _selectors.engine = LexborCSSSelector()  # type: ignore[no-untyped-call]
    return selector


def css_links(text: str, base: str, *, max_links: int = MAX_LINKS) -> Links:
    """Canonical URLs a style sheet refers to."""
    budget = _Budget(MAX_CSS)
    return _collect((canonical(raw, base) for raw in _css(text, budget)), max_links, budget)


class _Budget:
    """Characters of CSS a page may still have scanned."""

    def __init__(self, left: int) -> None:
        self.left = left
        self.cut = False

    def take(self, text: str) -> str:
        if len(text) > self.left:
            self.cut = True
        taken, self.left = text[: self.left], max(0, self.left - len(text))
        return taken


def _raw_links(nodes: list[LexborNode], budget: _Budget) -> Iterator[str]:
    for node in nodes:
        attributes = node.attributes
        for name in _ATTRIBUTES:
            value = attributes.get(name)
            if value:
                yield value
        srcset = attributes.get("srcset")
        if srcset:
            yield from _srcset(srcset)
        style = attributes.get("style")
        if style:
            yield from _css(style, budget)
        if node.tag == "style":
            yield from _css(node.text(deep=True), budget)
        elif node.tag == "meta":
            target = _refresh(attributes)
            if target:
                yield target


# <meta http-equiv="refresh" content="5; url='/next'">: a delay, then the URL, with or
# without "url=" and quotes (the HTML standard's parse, which browsers, wget and Scrapy
# follow). Linear: no quantifier can trade characters with another.
_REFRESH = re.compile(
    r"""\s*+[0-9.]++\s*+[;,]?+\s*+(?:url\s*+=\s*+)?+(?:"([^"]*+)|'([^']*+)|(\S.*+))""",
    re.IGNORECASE | re.DOTALL,
)


def _refresh(attributes: dict[str, str | None]) -> str | None:
    if (attributes.get("http-equiv") or "").strip().lower() != "refresh":
        return None
    found = _REFRESH.match((attributes.get("content") or "")[: MAX_URL + 64])
    if found is None:
        return None
    return (found.group(1) or found.group(2) or found.group(3) or "").strip() or None


def _srcset(value: str) -> Iterator[str]:
    for candidate in value.split(","):
        url = candidate.strip().split(" ")[0]
        if url:
            yield url


def _css(text: str, budget: _Budget) -> Iterator[str]:
    scanned = budget.take(text)
    for match in _CSS_URL.finditer(scanned):
        url = match.group(1) or match.group(2) or match.group(3)
        if url and not url.startswith("data:"):
            yield url
    for match in _CSS_IMPORT.finditer(scanned):
        yield match.group(1) or match.group(2)


def _collect(urls: Iterable[str | None], max_links: int, budget: _Budget) -> Links:
    found: dict[str, None] = {}
    for url in urls:
        if url is None:
            continue
        if len(found) >= max_links and url not in found:
            return Links(list(found), cut="links")
        found[url] = None
    return Links(list(found), cut="css" if budget.cut else None)
