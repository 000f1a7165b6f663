"""The demo site's server keeps serving through errors taking a connection."""

from __future__ import annotations

import asyncio
import errno
import socket
import urllib.error
import urllib.request
from typing import Any

import pytest

from trawl.demo import httpd, stamps
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return int(reply.status)


def test_an_error_taking_a_connection_skips_it_and_the_port_goes_on_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the guard the port's accept loop ended at the first error: connections
    then queued unanswered and every request timed out."""
    failures = [ConnectionAbortedError(errno.ECONNABORTED, "aborted"), OSError(errno.EMFILE, "")]
    accept = asyncio.selector_events.BaseSelectorEventLoop.sock_accept

    async def failing_accept(loop: Any, sock: socket.socket) -> tuple[socket.socket, Any]:
        if failures:
            raise failures.pop(0)
        return await accept(loop, sock)

    monkeypatch.setattr(
        asyncio.selector_events.BaseSelectorEventLoop, "sock_accept", failing_accept
    )
    monkeypatch.setattr(httpd, "ACCEPT_RETRY", 0.01)
    with SiteServer(generate(20)) as server:
        assert _get(server.url(("main", "/"))) == 200
        assert len(server.accept_errors) == 2

        enable = stamps.enable
        broken = [True]

        def enable_once_broken(conn: socket.socket) -> bool:
            if broken and conn.getsockname()[1] == server.ports["main"]:
                broken.pop()
                raise OSError(errno.EINVAL, "reset before it was taken")
            return enable(conn)

        monkeypatch.setattr(stamps, "enable", enable_once_broken)
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            _get(server.url(("main", "/")))
        assert _get(server.url(("main", "/"))) == 200
        assert len(server.accept_errors) == 3
