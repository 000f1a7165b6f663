"""A scheduled crawl asks whether the crawl it started last still runs: only "no such
crawl" means it is gone; any other failure fails the run instead of starting a second crawl
beside one that may still be running."""

from __future__ import annotations

import asyncio

import pytest

from trawl.runtime import recurring_task
from trawl.runtime.recurring_task import ActionFailed


def _status_when_show_fails(monkeypatch: pytest.MonkeyPatch, why: str) -> str:
    async def failing(argv: tuple[str, ...], db: str) -> str:
        raise ActionFailed(f"`trawl {' '.join(argv)}` exited 1: error: {why}")

    monkeypatch.setattr(recurring_task, "_trawl", failing)
    return asyncio.run(recurring_task._crawl_status(7, "sqlite:///x.db"))


def test_a_deleted_crawl_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    why = "no crawl has the id 7: `trawl crawl list` shows them"
    assert _status_when_show_fails(monkeypatch, why) == "GONE"


def test_an_unreachable_database_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    why = "cannot reach the database at postgresql://db/x: connection refused"
    with pytest.raises(ActionFailed, match="cannot reach the database"):
        _status_when_show_fails(monkeypatch, why)


def test_another_crawls_id_in_the_message_is_not_this_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ActionFailed):
        _status_when_show_fails(monkeypatch, "no crawl has the id 71")
