"""robots.txt: whether a URL may be fetched, and the Crawl-delay, for a user agent."""

from __future__ import annotations

import contextlib
from urllib.robotparser import RobotFileParser

ROBOTS_TTL = 86400.0  # refetch a host's robots.txt after a day
ERROR_TTL = 600.0  # after an error or a 5xx, try again after ten minutes


class Robots:
    """A parsed robots.txt; a 4xx or an unreachable file allows everything."""

    def __init__(self, status: int, body: str) -> None:
        self.status = status
        self._parser = RobotFileParser()
        lines = body.splitlines() if 200 <= status < 300 else []
        self._parser.parse(lines)
        self._delays = _delays(lines)

    def allowed(self, url: str, agent: str) -> bool:
        return self._parser.can_fetch(_token(agent), url)

    def delay(self, agent: str) -> float:
        """Crawl-delay for *agent* (its own group, else ``*``); fractions allowed, which the
        standard library's parser drops."""
        token = _token(agent).lower()
        own = [d for names, d in self._delays if any(n != "*" and n in token for n in names)]
        default = [d for names, d in self._delays if "*" in names]
        found = own or default
        return found[0] if found else 0.0

    def expires(self, fetched_at: float) -> float:
        ok = 200 <= self.status < 500
        return fetched_at + (ROBOTS_TTL if ok else ERROR_TTL)


def _delays(lines: list[str]) -> list[tuple[list[str], float]]:
    """(user agents of a group, its Crawl-delay) in file order."""
    groups: list[tuple[list[str], float]] = []
    agents: list[str] = []
    in_rules = False
    for raw in lines:
        name, _, value = raw.split("#", 1)[0].partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "user-agent":
            if in_rules:
                agents, in_rules = [], False
            agents.append(value.lower())
        elif name:
            in_rules = True
            if name == "crawl-delay" and agents:
                with contextlib.suppress(ValueError):
                    groups.append((list(agents), max(0.0, float(value))))
    return groups


def _token(agent: str) -> str:
    """The product token robots.txt groups match against: ``trawl`` of ``trawl/0.1 (...)``."""
    return agent.split("/")[0].split(" ")[0] or "*"


def robots_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}/robots.txt"
