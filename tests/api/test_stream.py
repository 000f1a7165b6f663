"""The journal as Server-Sent Events: woken by NOTIFY on PostgreSQL long before its poll,
and resumed with Last-Event-ID after a reconnect."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from tests.api.conftest import Served, make_tokens, serving
from tests.integration.helpers import item
from trawl.server import wakeups
from trawl.server.routes import journal as journal_routes
from trawl.store.store import Store


def _events(base: str, token: str, headers: dict[str, str], want: int) -> list[tuple[int, str]]:
    got: list[tuple[int, str]] = []
    auth = {"Authorization": f"Bearer {token}"} | headers
    with httpx.stream("GET", f"{base}/journal/stream", headers=auth, timeout=60) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        seq = None
        for line in answer.iter_lines():
            if line.startswith("id:"):
                seq = int(line[3:].strip())
            elif line.startswith("event:"):
                assert seq is not None
                got.append((seq, line[6:].strip()))
                if len(got) >= want:
                    return got
    return got


def test_stream_resumes_from_last_event_id(served: Served) -> None:
    with Store(served.db) as store:
        before = max((e.seq for e in store.journal(0, 10_000)), default=0)
        store.add_items([item(f"s:{n}") for n in range(5)])
    first = _events(served.base, served.tokens["read"], {"Last-Event-ID": str(before)}, 3)
    assert [k for _, k in first] == ["item.created"] * 3
    assert first[0][0] > before
    rest = _events(served.base, served.tokens["read"], {"Last-Event-ID": str(first[-1][0])}, 2)
    assert rest[0][0] > first[-1][0]
    assert len({s for s, _ in first + rest}) == 5


@pytest.mark.postgres
def test_a_notification_wakes_the_stream_long_before_its_poll(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neither the poll nor the keep-alive can wake it within the test: only a NOTIFY can.
    monkeypatch.setattr(wakeups, "POSTGRES_POLL", 600.0)
    monkeypatch.setattr(journal_routes, "KEEPALIVE", 600.0)
    tokens = make_tokens(pg_url)
    with Store(pg_url) as store:
        end = max([e.seq for e in store.journal(0, 10_000)], default=0)
    with serving(pg_url) as base:
        found: list[tuple[int, str]] = []
        reader = threading.Thread(
            target=lambda: found.extend(
                _events(base, tokens["read"], {"Last-Event-ID": str(end)}, 1)
            )
        )
        reader.start()
        time.sleep(1.0)  # the stream has read to the end and waits
        with Store(pg_url) as store:
            store.add_items([item("late:1")])
        reader.join(timeout=60)  # a tenth of the poll
        assert found
        assert found[0][1] == "item.created"
