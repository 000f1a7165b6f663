"""A crawl commit's and a plan batch's rows go to the database as one statement a table, on
both backends: on SQLite as a JSON array (``json_each``), not an ``executemany``, whose
every row is a statement run of its own. Whatever form they travel in, the rows stored are
the rows given, value for value."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.integration.helpers import sql_statements
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.model.records import NewItem
from trawl.store import bulk
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

SEED = "http://a.test/"


@pytest.fixture
def crawl_id(store: Store) -> int:
    operations.register(store, make_app().get(FETCH_TASK).info())
    return operations.create(store, operations.CrawlSpec(seeds=(SEED,)))


@contextmanager
def statement_runs(store: Store) -> Iterator[list[str]]:
    """Each statement the database runs: on SQLite from its trace callback (an executemany
    runs its statement once a row, which the statements sent would not show), on PostgreSQL
    each statement sent."""
    if not store.is_sqlite:
        with sql_statements() as sent:
            yield sent
        return
    runs: list[str] = []
    raw = store.db._raw
    raw.set_trace_callback(runs.append)
    try:
        yield runs
    finally:
        raw.set_trace_callback(None)


def _inserts(runs: list[str], table: str) -> list[str]:
    return [sql for sql in runs if sql.lstrip().upper().startswith(f"INSERT INTO {table.upper()}")]


def test_a_commits_attempts_are_stored_field_for_field_in_one_statement(
    store: Store, crawl_id: int
) -> None:
    rows: list[dict[str, Any]] = [
        {
            "crawl_id": crawl_id,
            "url": f"{SEED}{n}?q=é\"'\\",
            "attempt": n + 1,
            "ruleset": 1,
            "host": "a.test",
            "started_at": 1795836663.914110 + n / 7,
            "elapsed": 0.00106954574584961,
            "outcome": "done",
            "status_code": 200,
            "location": None,
            "content_type": "text/html; charset=utf-8",
            "size": 2**40 + n,
            "outlinks": n,
            "outlinks_cut": None,
            "error": "línea 1\nline 2" if n else None,
            "digest": f"sha1:{n:032d}",
            "warc_file": "x.warc.gz",
            "warc_offset": 2**33,
            "warc_length": 3146,
        }
        for n in range(20)
    ]
    with statement_runs(store) as runs, store.write():
        store.crawls.add_attempts(rows)
    assert len(_inserts(runs, "crawl_attempts")) == 1
    columns = list(rows[0])
    with store.read():
        stored = store.db.fetch(f"SELECT {', '.join(columns)} FROM crawl_attempts ORDER BY attempt")
    assert [dict(zip(columns, row, strict=True)) for row in stored] == rows
    assert all(type(row[5]) is float and type(row[11]) is int for row in stored)


def test_links_payloads_and_slots_go_in_one_statement_each(store: Store, crawl_id: int) -> None:
    links = [(f"{SEED}p{n % 3}", f"{SEED}c{n}", 1 + n % 2) for n in range(30)]
    links.append((f"{SEED}p0", f"{SEED}c0", 0))  # found again with fewer hops: kept
    payloads = [
        (crawl_id, f"sha1:{n % 10}", f"{SEED}c{n}", f"2026-11-28T00:00:{n:02d}Z") for n in range(30)
    ]
    slots = [
        (key, f"page:{n}", 1, 1000.5 + n) for n in range(12) for key in ("host:a.test", "crawl:1")
    ]
    again = [(key, item, 0, 1.0) for key, item, _, _ in slots[:2]]  # then taken as given
    with statement_runs(store) as runs, store.write():
        store.crawls.add_links(crawl_id, links)
        store.crawls.add_payloads(payloads)
        store.crawls.take(again + slots)
    for table in ("crawl_links", "crawl_payloads", "crawl_slots"):
        assert len(_inserts(runs, table)) == 1, table
    with store.read():
        hops = {
            (p, c): h for p, c, h in store.db.fetch("SELECT parent, child, hops FROM crawl_links")
        }
        first = store.crawls.payloads(crawl_id)
        held = store.db.fetch("SELECT key, item_id, attempt, until FROM crawl_slots")
    assert len(hops) == 30
    assert hops[f"{SEED}p0", f"{SEED}c0"] == 0
    assert hops[f"{SEED}p1", f"{SEED}c1"] == 2
    assert first == {f"sha1:{n}": (f"{SEED}c{n}", f"2026-11-28T00:00:{n:02d}Z") for n in range(10)}
    assert sorted(held) == sorted(slots)

    done = [(f"page:{n}", 1) for n in range(0, 12, 2)] + [("page:1", 2)]  # not its attempt
    with statement_runs(store) as runs, store.write():
        store.crawls.release_many(done)
    assert len([sql for sql in runs if sql.lstrip().upper().startswith("DELETE")]) == 1
    with store.read():
        left = {row[0] for row in store.db.fetch("SELECT item_id FROM crawl_slots")}
    assert left == {f"page:{n}" for n in range(1, 12, 2)}


def test_new_items_keep_their_data_and_first_tags_in_one_statement_a_table(store: Store) -> None:
    data = {"url": 'http://a.test/"quoted"\\path', "n": 1.5, "deep": {"list": [1, None, "ü"]}}
    new = [
        NewItem(id=f"item-{n}", tags=(("page", None), ("lang", "fr"), ("lang", "de")), data=data)
        for n in range(25)
    ]
    new.append(NewItem(id="item-3", tags=(("other", None),)))  # a duplicate id: first wins
    with statement_runs(store) as runs, store.write():
        created = bulk.add_items(store.db, new, 1795836663.25, "tester")
    assert created == [f"item-{n}" for n in range(25)]
    if store.is_sqlite:  # (PostgreSQL writes items and their aliases in one statement)
        for table in ("items", "aliases", "tags"):
            assert len(_inserts(runs, table)) == 1, table
    item = store.get_item("item-3")
    assert item is not None
    assert item.data == data
    assert item.tags == {"page": None, "lang": "fr"}
    with store.read():
        [(by, at)] = store.db.fetch("SELECT created_by, created_at FROM items WHERE id = 'item-24'")
    assert (by, at) == ("tester", 1795836663.25)


def test_nothing_to_write_sends_nothing(store: Store, crawl_id: int) -> None:
    with statement_runs(store) as runs, store.write():
        store.crawls.take([])
        store.crawls.release_many([])
        store.crawls.add_links(crawl_id, [])
        store.crawls.add_attempts([])
        store.crawls.add_payloads([])
        assert bulk.add_items(store.db, [], 0.0, None) == []
    assert not [sql for sql in runs if not sql.upper().startswith(("BEGIN", "COMMIT"))]
