"""Remote pipelines' rows: identity, token, routing and session state, on both backends."""

from __future__ import annotations

import pytest

from trawl.model.errors import Conflict, InvalidInput, InvalidItemId, NotFound
from trawl.store.store import Store


def test_a_pipeline_token_is_shown_once_and_stored_hashed(store: Store) -> None:
    token = store.pipelines.create(
        "scraper-eu", tags=["eu", "eu", "fast"], match_only=False, slots=8, now=store.clock()
    )
    assert len(token) >= 40
    row = store.pipelines.verify("scraper-eu", token)
    assert row is not None
    assert (row.id, row.tags, row.slots, row.match_only) == ("scraper-eu", ("eu", "fast"), 8, False)
    assert token not in repr(store.pipelines.list())
    assert store.pipelines.verify("scraper-eu", token + "x") is None
    assert store.pipelines.verify("other", token) is None
    assert store.pipelines.verify("scraper-eu", "x" * 300) is None


@pytest.mark.parametrize("bad", ["", "has space", "-leading", "a" * 65, "é", "a/b"])
def test_a_pipeline_id_must_be_a_plain_name(store: Store, bad: str) -> None:
    with pytest.raises(InvalidItemId, match="pipeline id"):
        store.pipelines.create(bad, tags=[], match_only=False, slots=1, now=store.clock())
    assert store.pipelines.list() == []


def test_slots_and_tags_are_checked_before_anything_is_written(store: Store) -> None:
    with pytest.raises(InvalidInput, match="slots must be between 1 and 10000, got 0"):
        store.pipelines.create("p", tags=[], match_only=False, slots=0, now=store.clock())
    with pytest.raises(InvalidItemId, match="tag name"):
        store.pipelines.create("p", tags=[""], match_only=False, slots=1, now=store.clock())
    assert store.pipelines.list() == []


def test_a_taken_id_is_a_conflict_and_the_first_pipeline_is_kept(store: Store) -> None:
    token = store.pipelines.create("p", tags=["a"], match_only=False, slots=2, now=store.clock())
    with pytest.raises(Conflict, match="'p' exists"):
        store.pipelines.create("p", tags=["b"], match_only=True, slots=9, now=store.clock())
    row = store.pipelines.verify("p", token)
    assert row is not None
    assert (row.tags, row.slots) == (("a",), 2)


def test_rotating_the_token_retires_the_old_one(store: Store) -> None:
    old = store.pipelines.create("p", tags=[], match_only=False, slots=1, now=store.clock())
    new = store.pipelines.rotate("p", store.clock() + 5)
    assert new != old
    assert store.pipelines.verify("p", old) is None
    row = store.pipelines.verify("p", new)
    assert row is not None
    assert row.token_rotated_at == store.clock() + 5
    with pytest.raises(NotFound, match="no pipeline is named 'q'"):
        store.pipelines.rotate("q", store.clock())


def test_update_changes_routing_and_unknown_pipelines_are_named(store: Store) -> None:
    store.pipelines.create("p", tags=["eu", "slow"], match_only=False, slots=4, now=store.clock())
    row = store.pipelines.update("p", add_tags=["us"], remove_tags=["slow"], match_only=True)
    assert (row.tags, row.match_only, row.slots) == (("eu", "us"), True, 4)
    row = store.pipelines.update("p", slots=16, draining=True)
    assert (row.slots, row.draining) == (16, True)
    with pytest.raises(InvalidInput, match="slots"):
        store.pipelines.update("p", slots=0)
    with pytest.raises(NotFound, match="no pipeline is named 'q'"):
        store.pipelines.update("q", slots=2)
    with pytest.raises(NotFound, match="no pipeline is named 'q'"):
        store.pipelines.require("q")


def test_session_state_follows_connect_checkin_and_disconnect(store: Store) -> None:
    store.pipelines.create("p", tags=[], match_only=False, slots=4, now=store.clock())
    store.pipelines.connected("p", "node-a", "trawl 0.1", 100.0)
    store.pipelines.checkin("p", 110.0, in_use=3, free=5 << 30, total=10 << 30)
    row = store.pipelines.require("p")
    assert (row.server, row.connected_at, row.last_checkin) == ("node-a", 100.0, 110.0)
    assert (row.in_use, row.disk_free, row.client_version) == (3, 5 << 30, "trawl 0.1")
    store.pipelines.connected("p", "node-b", "trawl 0.1", 120.0)  # it reconnected elsewhere
    store.pipelines.disconnected("p", "node-a")  # the old server's late goodbye changes nothing
    assert store.pipelines.require("p").server == "node-b"
    store.pipelines.disconnected("p", "node-b")
    row = store.pipelines.require("p")
    assert (row.server, row.connected_at, row.in_use) == (None, None, 0)


def test_delete_removes_the_pipeline_and_its_token(store: Store) -> None:
    token = store.pipelines.create("p", tags=[], match_only=False, slots=1, now=store.clock())
    assert store.pipelines.delete("p")
    assert not store.pipelines.delete("p")
    assert store.pipelines.verify("p", token) is None
