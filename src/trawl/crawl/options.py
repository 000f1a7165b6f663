"""A crawl's settings as stored with it (``crawls.options``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from trawl.crawl.extract import MAX_LINKS
from trawl.crawl.warc import DEFAULT_MAX_SIZE

if TYPE_CHECKING:
    from trawl.crawl.rules import Settings
    from trawl.store.crawls import CrawlRow


@dataclass(frozen=True, kw_only=True, slots=True)
class Options:
    delay: float = 0.0  # seconds between request starts on one host
    per_host: int | None = None  # requests in flight per host (None: the crawl's concurrency)
    robots: bool = True
    timeout: float = 30.0  # one request, connect to last byte
    max_bytes: int = 100 << 20  # bodies are cut (WARC-Truncated) past this
    warc: str | None = None  # WARC path: x.warc.gz, then x-00001.warc.gz ...
    warc_size: int = DEFAULT_MAX_SIZE
    warc_sync: bool = True  # fdatasync a record before the commit that records its offset
    max_links: int = MAX_LINKS  # outlinks kept per page (a cut is recorded on the attempt)
    max_redirects: int = 10  # hops in one redirect chain before the page fails
    max_crawl_delay: float = 5.0  # a robots.txt Crawl-delay above this is capped
    host_grace: float = 60.0  # a host erring this long backs off without failing pages
    browser: bool = False  # render pages in Chromium unless a render rule says plain
    load_timeout: float = 30.0  # a browser page's load event waited for at most this
    idle_wait: float = 2.0  # then network idle waited for at most this (and after a script)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Options:
        return cls(**{k: v for k, v in value.items() if k in _FIELDS})


_FIELDS = frozenset(f.name for f in fields(Options))


def options_of(crawl: CrawlRow) -> Options:
    """The crawl's options (settings a later trawl dropped are ignored)."""
    # Asked for at every page's plan and sync; comparing the stored dict with the one last
    # parsed costs a tenth of building the dataclass again (2 % of a crawl's CPU).
    seen = _PARSED.get(crawl.id)
    if seen is not None and seen[0] == crawl.options:
        return seen[1]
    options = Options.from_json(crawl.options)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[crawl.id] = (dict(crawl.options), options)  # a copy: the row's dict may change
    return options


_PARSED: dict[int, tuple[dict[str, Any], Options]] = {}
_PARSED_MAX = 256


def wants_browser(options: Options, settings: Settings) -> bool:
    """Whether a page is to be rendered in a browser (if it turns out to be HTML): its
    ``render`` rule says so, or none does and the crawl is a ``--browser`` crawl."""
    return settings.render == "browser" or (settings.render is None and options.browser)
