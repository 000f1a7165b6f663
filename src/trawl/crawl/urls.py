"""URLs as the crawler compares them: canonical form, host keys, page item ids."""

from __future__ import annotations

from urllib.parse import SplitResult, urljoin, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL = 2000  # page item ids carry the URL; item ids stop at 2,048 characters


def canonical(url: str, base: str | None = None) -> str | None:
    """*url* (resolved against *base*) with the fragment removed, scheme and host
    lower-cased, the default port dropped and an empty path made ``/``; ``None`` when it is
    not an http(s) URL trawl can fetch."""
    text = url.strip()
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
    if scheme not in _DEFAULT_PORTS or not host or any(c in text for c in " \t\r\n"):
        return None
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    if ":" in host and not host.startswith("["):
        netloc = f"[{host}]" if port in (None, _DEFAULT_PORTS[scheme]) else f"[{host}]:{port}"
    result = urlunsplit(SplitResult(scheme, netloc, parts.path or "/", parts.query, ""))
    return result if len(result) <= MAX_URL else None


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
