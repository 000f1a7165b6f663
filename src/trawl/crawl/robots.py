"""robots.txt per RFC 9309: whether a URL may be fetched, and the Crawl-delay, for a user
agent.

Parsing and matching are protego's (Scrapy's parser): ``*`` and ``$`` wildcards, the
longest matching rule wins and ``Allow`` wins a tie, which the standard library's parser
does not do. How a fetch result maps to rules is the RFC's: a 2xx is parsed; a 4xx (or a
redirect chain longer than five) means there are no rules; a 5xx or no answer means
*everything* is disallowed for now — the pages wait (they are not skipped) and the file is
asked for again after a short while, never cached for a day.
"""

from __future__ import annotations

from protego import Protego

ROBOTS_TTL = 86400.0  # refetch a host's robots.txt after a day
ERROR_TTL = 15.0  # after a 5xx or no answer, ask again soon (one request per 15 s)
MAX_BYTES = 1 << 20  # fetched and parsed (the RFC asks for at least 500 KiB)
MAX_REDIRECTS = 5  # the RFC's minimum; past it the file counts as unavailable (4xx)
UNREACHABLE = 599  # the status kept when no response came


class Robots:
    """A host's robots.txt as fetched: its status and, for a 2xx, its rules."""

    def __init__(self, status: int, body: str) -> None:
        self.status = status
        self._rules = Protego.parse(body if 200 <= status < 300 else "")

    @property
    def unavailable(self) -> bool:
        """The server erred or did not answer: nothing may be fetched until it does."""
        return self.status >= 500

    def allowed(self, url: str, agent: str) -> bool:
        if self.unavailable:
            return False
        return bool(self._rules.can_fetch(url, _token(agent)))

    def delay(self, agent: str) -> float:
        """Crawl-delay for *agent* (its own group, else ``*``), in seconds (fractions too)."""
        found = self._rules.crawl_delay(_token(agent))
        return max(0.0, float(found)) if found is not None else 0.0

    def expires(self, fetched_at: float) -> float:
        return fetched_at + (ERROR_TTL if self.unavailable else ROBOTS_TTL)


def _token(agent: str) -> str:
    """The product token robots.txt groups match against: ``trawl`` of ``trawl/0.1 (...)``."""
    return agent.split("/")[0].split(" ")[0] or "*"


def robots_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}/robots.txt"
