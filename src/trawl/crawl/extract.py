"""Links out of HTML and CSS: ``a``, ``link``, ``img``, ``script``, ``iframe``, ``srcset``
and CSS ``url()``, canonicalised and deduplicated in document order."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from selectolax.lexbor import LexborHTMLParser

from trawl.crawl.urls import canonical

_SELECTOR = (
    "a[href], area[href], link[href], img[src], img[srcset], script[src], iframe[src],"
    " frame[src], source[src], source[srcset], embed[src], video[src], audio[src],"
    " [style], style"
)
_ATTRIBUTES = ("href", "src")
_CSS_URL = re.compile(r"""url\(\s*(['"]?)([^'")]+)\1\s*\)""", re.IGNORECASE)
_CSS_IMPORT = re.compile(r"""@import\s+(['"])([^'"]+)\1""", re.IGNORECASE)


def html_links(body: bytes, base: str) -> list[str]:
    """Canonical URLs an HTML document links to or embeds."""
    tree = LexborHTMLParser(body)
    base_tag = tree.css_first("base[href]")
    if base_tag is not None:
        base = canonical(base_tag.attributes.get("href") or "", base) or base
    return _unique(canonical(raw, base) for raw in _raw_links(tree))


def css_links(text: str, base: str) -> list[str]:
    """Canonical URLs a style sheet refers to."""
    return _unique(canonical(raw, base) for raw in _css(text))


def _raw_links(tree: LexborHTMLParser) -> Iterator[str]:
    for node in tree.css(_SELECTOR):
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
            yield from _css(style)
        if node.tag == "style":
            yield from _css(node.text(deep=True))


def _srcset(value: str) -> Iterator[str]:
    for candidate in value.split(","):
        url = candidate.strip().split(" ")[0]
        if url:
            yield url


def _css(text: str) -> Iterator[str]:
    for match in _CSS_URL.finditer(text):
        if not match.group(2).startswith("data:"):
            yield match.group(2)
    for match in _CSS_IMPORT.finditer(text):
        yield match.group(2)


def _unique(urls: Iterable[str | None]) -> list[str]:
    return list(dict.fromkeys(u for u in urls if u is not None))
