"""The live pages' event streams over a real server: a signed-in browser's EventSource
gets the pieces of its topic as Server-Sent Events; the journal's stream only the entries
its filters keep."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import httpx

from tests.dashboard import seed
from tests.dashboard.conftest import Server


def _signed_in(server: Server, scope: str) -> httpx.Client:
    client = httpx.Client(base_url=server.base, timeout=20, follow_redirects=True)
    page = client.get("/ui/signin")
    csrf = re.search(r'name="_csrf" value="([^"]+)"', page.text)
    assert csrf
    answer = client.post("/ui/signin", data={"_csrf": csrf.group(1), "token": server.tokens[scope]})
    assert answer.status_code == 200, answer.text  # followed to the overview
    return client


def _events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) of each event of an event stream."""
    event, data = "message", []
    for line in lines:
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            yield event, "\n".join(data)
            event, data = "message", []


def test_the_overview_stream_sends_its_pieces(server: Server) -> None:
    client = _signed_in(server, "read")
    with contextlib.closing(client):
        headers = {"Accept": "text/event-stream"}
        with client.stream("GET", "/ui/live/overview", headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            seen: dict[str, str] = {}
            for event, data in _events(stream.iter_lines()):
                seen[event] = data
                if {"tasks", "summary"} <= set(seen):
                    break
    assert '<tr data-task="price">' in seen["tasks"]
    assert "Workers holding leases" in seen["summary"]


def test_the_journal_stream_keeps_only_what_its_filters_keep(server: Server) -> None:
    client = _signed_in(server, "read")
    with contextlib.closing(client):
        headers = {"Accept": "text/event-stream"}
        query = "/ui/live/journal?kind=alias.created"
        with client.stream("GET", query, headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            seed.failed(server.db, "sku:1")  # journals job.failed: filtered out
            seed.aliased(server.db, "sku:2", "ean:77")
            entries = next(d for e, d in _events(stream.iter_lines()) if e == "entries")
    assert "ean:77" in entries
    assert "job.failed" not in entries
