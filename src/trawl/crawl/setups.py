"""How long a host's requests take to get a connection, so the next one can start on time.

A request that needs a new connection (DNS, TCP and TLS to a distant host, or any request
to a host that keeps no connection open) is ready to send a round trip or more after it
began. Begun on its politeness start, it missed that start, and took a new one: when the
host had a later start reserved already, a whole delay later, so each request used two
starts. A request to a host whose last request took that long to connect is begun that much
(and half as much again) before its start, and waits, connected, in the HTTP client to send
on it (client.Ready).
"""

from __future__ import annotations

LEAD_MAX = 0.5  # seconds: a slower setup is late on its start, and takes a new one
LEAD_FACTOR = 1.5  # setups vary from one connection to the next
HOSTS = 10_000  # the hosts remembered, the latest used


class Setups:
    """The last connection setup time seen per host, in one process."""

    def __init__(self, hosts: int = HOSTS) -> None:
        self._hosts = hosts
        self._seen: dict[str, float] = {}

    def note(self, host: str, seconds: float) -> None:
        self._seen.pop(host, None)  # to the end: the latest used
        self._seen[host] = seconds
        if len(self._seen) > self._hosts:
            del self._seen[next(iter(self._seen))]

    def lead(self, host: str) -> float:
        """How long before its start a request to *host* is begun (0 for a host whose
        last request found a kept-alive connection, or a host not seen)."""
        return min(LEAD_MAX, LEAD_FACTOR * self._seen.get(host, 0.0))
