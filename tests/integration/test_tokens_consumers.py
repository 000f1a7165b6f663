"""API tokens and journal consumers, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest

from tests.integration.helpers import FakeClock, item, task
from trawl.model.errors import Conflict, InvalidInput, InvalidItemId, NotFound
from trawl.store.store import Store

# -- tokens -----------------------------------------------------------------------------


def test_a_token_is_shown_once_and_stored_hashed(store: Store) -> None:
    text = store.tokens.create("seeder", "write", store.clock())
    prefix, token_id, secret = text.split("_", 2)
    assert prefix == "trawl"
    assert token_id
    assert len(secret) >= 40
    row = store.tokens.verify(text, store.clock())
    assert row is not None
    assert (row.name, row.scope) == ("seeder", "write")
    with store.read():
        dump = repr(store.tokens.list()) + repr(store.journal())
    assert secret not in dump  # neither the listing nor the journal shows the secret


@pytest.mark.parametrize(
    "bad",
    ["", "trawl", "trawl_", "trawl_x", "nottrawl_a_b", "trawl_unknown_secret", "x" * 300],
)
def test_made_up_tokens_are_refused(store: Store, bad: str) -> None:
    store.tokens.create("real", "read", store.clock())
    assert store.tokens.verify(bad, store.clock()) is None


def test_a_wrong_secret_for_a_real_id_is_refused(store: Store) -> None:
    text = store.tokens.create("real", "admin", store.clock())
    assert store.tokens.verify(text[:-1] + ("A" if text[-1] != "A" else "B"), 0) is None


def test_revoked_tokens_stop_working_and_free_their_name(store: Store) -> None:
    text = store.tokens.create("ci", "read", store.clock())
    with pytest.raises(Conflict, match="'ci' exists"):
        store.tokens.create("ci", "admin", store.clock())
    assert store.tokens.revoke("ci", store.clock())
    assert not store.tokens.revoke("ci", store.clock())  # already revoked
    assert store.tokens.verify(text, store.clock()) is None
    again = store.tokens.create("ci", "admin", store.clock())
    row = store.tokens.verify(again, store.clock())
    assert row is not None
    assert row.scope == "admin"
    assert [(t.name, t.revoked_at) for t in store.tokens.list()] == [("ci", None)]


def test_last_use_is_recorded_at_most_once_a_minute(store: Store, clock: FakeClock) -> None:
    text = store.tokens.create("t", "read", clock())
    store.tokens.verify(text, clock())
    first = store.tokens.list()[0].last_used_at
    assert first == clock()
    clock.advance(10)
    store.tokens.verify(text, clock())
    assert store.tokens.list()[0].last_used_at == first
    clock.advance(60)
    store.tokens.verify(text, clock())
    assert store.tokens.list()[0].last_used_at == clock()


def test_token_names_and_scopes_are_checked(store: Store) -> None:
    with pytest.raises(InvalidInput, match="scope 'root' is not one of read, write, admin"):
        store.tokens.create("t", "root", store.clock())
    with pytest.raises(InvalidItemId, match="token name is empty"):
        store.tokens.create("", "read", store.clock())
    assert store.tokens.list() == []


# -- consumers --------------------------------------------------------------------------


def _entries(store: Store, count: int) -> int:
    store.register_tasks([task()])
    store.add_items([item(f"sku:{n}", "product") for n in range(count)])
    return store.journal(0, 100_000)[-1].seq


def test_a_consumer_starts_at_the_beginning_or_the_end(store: Store) -> None:
    last = _entries(store, 3)
    assert store.consumers.position("all", store.clock()) == 0
    assert store.consumers.position("new", store.clock(), start="end") == last
    # named again, it keeps its position whatever start says
    assert store.consumers.position("all", store.clock(), start="end") == 0


def test_acks_move_forward_only_and_never_past_the_end(store: Store, clock: FakeClock) -> None:
    last = _entries(store, 3)
    store.consumers.position("idx", clock())
    assert store.consumers.ack("idx", last - 1, clock()) == last - 1
    assert store.consumers.ack("idx", 1, clock()) == last - 1  # a late ack changes nothing
    with pytest.raises(InvalidInput, match=f"its last seq is {last}"):
        store.consumers.ack("idx", last + 1, clock())
    with pytest.raises(NotFound, match="no consumer is named 'ghost'"):
        store.consumers.ack("ghost", 1, clock())
    [row] = store.consumers.list()
    assert (row.name, row.position, row.lag, row.acked_at) == ("idx", last - 1, 1, clock())


def test_a_consumer_that_crashes_resumes_after_its_last_ack(store: Store) -> None:
    _entries(store, 5)
    position = store.consumers.position("c", store.clock())
    page = store.journal(position, 2)
    store.consumers.ack("c", page[-1].seq, store.clock())
    store.journal(page[-1].seq, 2)  # read, then "crashed" before acknowledging
    resumed = store.journal(store.consumers.position("c", store.clock()), 2)
    assert resumed[0].seq == page[-1].seq + 1


def test_prune_keeps_what_a_consumer_has_not_acknowledged(store: Store, clock: FakeClock) -> None:
    last = _entries(store, 4)
    store.consumers.position("slow", clock())
    clock.advance(3600)
    before = clock()
    with pytest.raises(Conflict, match=r"not acknowledged by 1 consumer\(s\): slow \(at 0\)"):
        store.prune_journal(before)
    assert len(store.journal(0, 1000)) == last  # nothing went
    store.consumers.ack("slow", last - 2, clock())
    with pytest.raises(Conflict):
        store.prune_journal(before)
    store.consumers.ack("slow", last, clock())
    assert store.prune_journal(before) == last
    assert store.journal(0, 1000) == []
    assert store.prune_journal(before) == 0  # nothing old is left


def test_forced_prune_and_forgotten_consumers(store: Store, clock: FakeClock) -> None:
    last = _entries(store, 2)
    store.consumers.position("stuck", clock())
    clock.advance(10)
    assert store.prune_journal(clock(), force=True) == last
    assert store.consumers.delete("stuck")
    assert not store.consumers.delete("stuck")
    assert store.consumers.list() == []


def test_prune_only_takes_entries_older_than_before(store: Store, clock: FakeClock) -> None:
    _entries(store, 2)
    cut = clock.advance(10)
    store.add_items([item("late:1", "product")])
    kept = [e.seq for e in store.journal(0, 1000) if e.at >= cut]
    assert store.prune_journal(cut) > 0
    assert [e.seq for e in store.journal(0, 1000)] == kept
