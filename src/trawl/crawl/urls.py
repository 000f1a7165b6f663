"""URLs as the crawler compares them: canonical form, host keys, page item ids."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urljoin, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL = 2000  # page item ids carry the URL; item ids stop at 2,048 characters


# A link that needs no parsing to be canonical: only these characters (no spaces, no
# backslashes, no non-ASCII, no ";" whose empty parameters urllib drops), no dot segment
# ("/." anywhere sends it the long way), no empty query; root-relative, or absolute with a
# lower-case scheme and host. Most links on most pages.
_PLAIN = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,=:@%/?]*\Z")
_PLAIN_ABSOLUTE = re.compile(r"https?://[a-z0-9.\-]+(?::([0-9]+))?/")


def canonical(url: str, base: str | None = None) -> str | None:
    """*url* (resolved against *base*) with the fragment removed, scheme and host
    lower-cased, the default port dropped and an empty path made ``/``; ``None`` when it is
    not an http(s) URL trawl can fetch. *base* is a canonical URL."""
    text = url.strip()
    cut = text.find("#")
    plain = text if cut < 0 else text[:cut]
    if _PLAIN.match(plain) and not plain.endswith("?") and "/." not in plain and _unspaced(text):
        # The common cases, without urllib (a crawl canonicalizes every link it sees).
        if plain.startswith("/") and not plain.startswith("//") and base is not None:
            origin = base[: base.find("/", base.find("//") + 2)]
            return _capped(origin + plain)
        absolute = _PLAIN_ABSOLUTE.match(plain)
        if absolute is not None and _kept_port(absolute.group(1)):
            return _capped(plain)
    return _canonical(text, base)


def _unspaced(text: str) -> bool:
    return not any(c in text for c in " \t\r\n")  # (the full parse takes these)


def _kept_port(port: str | None) -> bool:
    """Whether a URL's port stays as written in its canonical form (neither a default
    port, which is dropped, nor one written oddly or out of range)."""
    if port is None:
        return True
    return not port.startswith("0") and port not in ("80", "443") and int(port) <= 65535


def _capped(result: str) -> str | None:
    return result if len(result) <= MAX_URL else None


def _canonical(text: str, base: str | None) -> str | None:
    if base is not None:
        try:
            text = urljoin(base, text)
        except ValueError:
            return None
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host or " " in parts.netloc:
        return None
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    if ":" in host and not host.startswith("["):
        netloc = f"[{host}]" if port in (None, _DEFAULT_PORTS[scheme]) else f"[{host}]:{port}"
    # As browsers, wget and Scrapy do: tabs and newlines anywhere are dropped (urlsplit has
    # done that) and a space in the path or query is sent as %20 - links such as
    # "/files/My Report.pdf" are common, and refusing them left such pages uncrawled.
    path = (parts.path or "/").replace(" ", "%20")
    query = parts.query.replace(" ", "%20")
    return _capped(urlunsplit(SplitResult(scheme, netloc, path, query, "")))


def host(url: str) -> str:
    """The politeness key: ``host`` or ``host:port`` as in the canonical URL."""
    return urlsplit(url).netloc


def page_id(crawl_id: int, url: str) -> str:
    """The item id of a crawl's page."""
    return f"page:{crawl_id}:{url}"


def request_target(url: str) -> str:
    """Path and query, as the request line carries them."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
