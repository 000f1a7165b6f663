"""Politeness plans asked for together are made together: one transaction for a batch, the
same plans as one after another, and a plan that fails or an asker that gives up costs
only its own attempt."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from tests.integration.helpers import FakeClock
from tests.support.crawl_rows import crawl_row
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.frontier import Found, discover
from trawl.crawl.options import Options, options_of
from trawl.crawl.politeness import BUSY_RETRY, Ask, Gate, Plan, _Wanted
from trawl.crawl.port import Batcher, payload_batcher, plan_batcher
from trawl.crawl.urls import page_id
from trawl.runtime.store_thread import StoreThread
from trawl.store.crawls import FETCH_TASK, CrawlTables
from trawl.store.store import Store

T = TypeVar("T")
SEED = "http://a.test/"
PAGES = [f"{SEED}{n}" for n in range(6)]
DELAY = 0.2  # a host's second start is within politeness.HOLD: waited for, not put aside


@pytest.fixture
def crawl_id(store: Store) -> int:
    operations.register(store, make_app().get(FETCH_TASK).info())
    options = Options(robots=False, delay=DELAY, per_host=2)
    made = operations.create(store, operations.CrawlSpec(seeds=(SEED,), options=options))
    with store.write():
        discover(store.crawls, made, SEED, [Found(url=u) for u in PAGES], store.clock())
    with store.write():  # every page's job running its first attempt, as after a claim
        store.db.send("UPDATE jobs SET status = 'running', attempt = 1, due_at = 1e12")
    return made


def _ask(crawl_id: int, url: str, finished: tuple[tuple[str, int], ...] = ()) -> Ask:
    return Ask(
        crawl_id=crawl_id, url=url, item_id=page_id(crawl_id, url), attempt=1, finished=finished
    )


def _shape(plans: list[Plan]) -> list[tuple[str, float]]:
    return [(p.action, round(p.start_at, 6)) for p in plans]


def test_a_batch_plans_as_the_same_asks_one_after_another(
    store: Store, clock: FakeClock, crawl_id: int
) -> None:
    asks = [_ask(crawl_id, url) for url in PAGES[:4]]
    gate = Gate(random.Random(1))
    alone = [gate.begin(store, a.crawl_id, a.url, a.item_id, a.attempt, []) for a in asks]
    with store.write():  # the same politeness state again
        store.db.send("DELETE FROM crawl_slots")
        store.db.send("UPDATE crawl_hosts SET next_at = 0")
    together = Gate(random.Random(1)).begin_many(store, asks)
    assert _shape(together) == _shape(alone)
    # two slots on the host: two go, a delay apart, and two wait
    assert [p.action for p in alone] == ["fetch", "fetch", "defer", "defer"]
    assert alone[1].start_at - alone[0].start_at >= DELAY
    clock.now += 2
    done = tuple((a.item_id, a.attempt) for a in asks[:2])
    then = Gate(random.Random(1)).begin_many(
        store, [_ask(crawl_id, PAGES[4], done), _ask(crawl_id, PAGES[5])]
    )
    assert [p.action for p in then] == ["fetch", "fetch"], "finished requests freed first"
    with store.read():  # the finished requests' slots went, in one statement; no other did
        held = store.db.fetch("SELECT item_id, key FROM crawl_slots ORDER BY item_id, key")
    assert sorted(held) == sorted(
        (page_id(crawl_id, url), key)
        for url in PAGES[4:]
        for key in (f"crawl:{crawl_id}", "host:a.test")
    ), held


def test_a_plan_that_waited_for_the_host_counts_the_slots_taken_meanwhile(
    db_url: str, store: Store, clock: FakeClock, crawl_id: int
) -> None:
    """The slots in use are read once the host's row is granted: a plan queued behind
    another process's transaction sees the slots that transaction took, and does not go
    past the host's two."""
    keys = ("host:a.test", f"crawl:{crawl_id}")
    with store.write():
        store.crawls.host("a.test")  # the row exists, as it does once a host was seen
    plans: list[Plan] = []

    def other_process() -> None:
        with Store(db_url, clock=clock) as other:
            plans.extend(Gate(random.Random(1)).begin_many(other, [_ask(crawl_id, PAGES[2])]))

    with store.write(soft=True):
        store.crawls.host("a.test")  # locked on PostgreSQL; SQLite's writer lock is held
        until = clock.now + 60
        store.crawls.take(
            [(key, page_id(crawl_id, url), 1, until) for url in PAGES[:2] for key in keys]
        )
        planner = threading.Thread(target=other_process)
        planner.start()
        time.sleep(0.5)  # the planner is waiting for this transaction by now
    planner.join(10)
    assert [p.action for p in plans] == ["defer"], "a third request went to a host of two"


def test_planners_racing_for_one_host_keep_its_slots_and_its_spacing(
    db_url: str, clock: FakeClock, crawl_id: int
) -> None:
    """Six processes ask at the same moment for six pages of a host of two slots, a
    delay of 0.2 s: two fetch, their starts 0.2 s apart, the other four defer."""
    ready = threading.Barrier(len(PAGES))
    plans: list[Plan] = []

    def planner(url: str) -> None:
        with Store(db_url, clock=clock) as other:
            other.crawls.get(crawl_id)  # connected before the race starts
            ready.wait(10)
            plans.extend(Gate(random.Random(1)).begin_many(other, [_ask(crawl_id, url)]))

    threads = [threading.Thread(target=planner, args=(url,)) for url in PAGES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    fetches = sorted(p.start_at for p in plans if p.action == "fetch")
    assert len(plans) == len(PAGES)
    assert len(fetches) == 2, [p.action for p in plans]
    assert fetches[1] - fetches[0] >= DELAY


def test_a_plan_rolled_back_leaves_no_host_taken_for_known(
    store: Store, crawl_id: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first plan on a host makes its row; if that transaction rolls back, the row is
    gone, and the next plan must make it again rather than trust it exists."""
    gate = Gate(random.Random(1))
    failures = iter([RuntimeError("the connection dropped")])

    def fail_once(original: Callable[..., T]) -> Callable[..., T]:
        def wrapper(*args: Any, **kwargs: Any) -> T:
            error = next(failures, None)
            if error is not None:
                raise error
            return original(*args, **kwargs)

        return wrapper

    for name in ("held", "reserve_later"):  # SQLite's path, PostgreSQL's
        monkeypatch.setattr(CrawlTables, name, fail_once(getattr(CrawlTables, name)))
    with pytest.raises(RuntimeError, match="dropped"):
        gate.begin_many(store, [_ask(crawl_id, PAGES[0])])
    (plan,) = gate.begin_many(store, [_ask(crawl_id, PAGES[0])])
    assert plan.action == "fetch"


def test_a_reservation_the_server_made_nothing_of_is_never_a_fetch(crawl_id: int) -> None:
    """PostgreSQL's reservation said nothing was reserved while the values it read pass
    every rule (the two sides' arithmetic apart): the page steps back, it does not fetch
    on a start nobody reserved."""
    crawl = crawl_row(crawl_id, Options(robots=False, delay=0.5).to_json())
    options = options_of(crawl)
    plan = Plan(action="fetch", crawl=crawl, options=options)
    wanted = _Wanted(plan, crawl, options, "a.test", 0.5, _ask(crawl_id, PAGES[0]))
    now = 1000.0
    free = (now, None, 0, 0, 0, None)  # next start now, no block, no slot in use
    made = Gate(random.Random(1))._reserved(now, wanted, [free])
    assert (made.action, made.until) == ("defer", now + BUSY_RETRY)


class _CountingGate(Gate):
    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__(random.Random(1))
        self.batches: list[int] = []
        self.fail_on = fail_on

    def begin_many(self, store: Store, asks: Any, browser: bool = True) -> list[Plan]:
        self.batches.append(len(asks))
        if any(a.url == self.fail_on for a in asks):
            raise RuntimeError(f"no plan for {self.fail_on}")
        return super().begin_many(store, asks, browser)


@pytest.fixture
def thread(db_url: str, clock: FakeClock) -> Iterator[StoreThread]:
    opened = StoreThread(Store(db_url, clock=clock))
    yield opened
    opened.close()


async def _plans(batcher: Batcher[Ask, Plan], thread: StoreThread, asks: list[Ask]) -> list[Any]:
    calls = [batcher.ask(thread.with_store, a) for a in asks]
    try:
        return await asyncio.gather(*calls, return_exceptions=True)
    finally:
        await batcher.close()


def test_asks_made_at_once_share_one_transaction(thread: StoreThread, crawl_id: int) -> None:
    gate = _CountingGate()
    plans = asyncio.run(_plans(plan_batcher(gate), thread, [_ask(crawl_id, u) for u in PAGES[:4]]))
    assert gate.batches == [4]
    assert [p.action for p in plans] == ["fetch", "fetch", "defer", "defer"]


def test_a_plan_that_fails_fails_only_its_own_attempt(thread: StoreThread, crawl_id: int) -> None:
    gate = _CountingGate(fail_on=PAGES[1])
    plans = asyncio.run(_plans(plan_batcher(gate), thread, [_ask(crawl_id, u) for u in PAGES[:3]]))
    assert gate.batches == [3, 1, 1, 1], "the batch failed, then each ask alone"
    assert isinstance(plans[1], RuntimeError)
    assert [plans[0].action, plans[2].action] == ["fetch", "fetch"]


def test_an_asker_that_gives_up_does_not_stop_the_others(
    thread: StoreThread, crawl_id: int
) -> None:
    gate = _CountingGate()
    batcher = plan_batcher(gate)

    async def main() -> tuple[list[str], bool]:
        asks = [_ask(crawl_id, u) for u in PAGES[:3]]
        calls = [asyncio.create_task(batcher.ask(thread.with_store, a)) for a in asks]
        calls[0].cancel()  # its attempt timed out before its plan came
        done = await asyncio.gather(*calls[1:])
        later = await batcher.ask(thread.with_store, _ask(crawl_id, PAGES[3]))
        await batcher.close()
        return [p.action for p in [*done, later]], calls[0].cancelled()

    actions, cancelled = asyncio.run(main())
    assert cancelled
    assert actions == ["fetch", "fetch", "defer"]


def test_closing_the_batcher_ends_the_asks_still_waiting(
    thread: StoreThread, crawl_id: int
) -> None:
    async def main() -> bool:
        batcher = plan_batcher(_CountingGate())
        waiting = asyncio.create_task(batcher.ask(thread.with_store, _ask(crawl_id, PAGES[0])))
        await asyncio.sleep(0)  # asked; the batch is on its way to the database thread
        await batcher.close()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return waiting.cancelled()

    assert asyncio.run(main())


class _SlowGate(_CountingGate):
    def __init__(self) -> None:
        super().__init__()
        self.entered, self.go = threading.Event(), threading.Event()

    def begin_many(self, store: Store, asks: Any, browser: bool = True) -> list[Plan]:
        self.entered.set()
        self.go.wait(10)
        return super().begin_many(store, asks, browser)


def test_closing_the_batcher_ends_the_asks_whose_batch_is_at_the_database(
    thread: StoreThread, crawl_id: int
) -> None:
    gate = _SlowGate()

    async def main() -> bool:
        batcher = plan_batcher(gate)
        waiting = asyncio.create_task(batcher.ask(thread.with_store, _ask(crawl_id, PAGES[0])))
        await asyncio.to_thread(gate.entered.wait, 10)
        await batcher.close()
        gate.go.set()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return waiting.cancelled()

    assert asyncio.run(main())


def test_first_copies_asked_at_once_take_one_query_a_crawl(
    thread: StoreThread, store: Store, crawl_id: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = operations.create(store, operations.CrawlSpec(seeds=("http://b.test/",)))
    with store.write():
        store.crawls.add_payloads(
            [(crawl_id, "sha1:A", f"{SEED}1", "d1"), (other, "sha1:B", "http://b.test/", "d2")]
        )
    queries: list[tuple[int, list[str]]] = []
    real = CrawlTables.payloads_of

    def payloads_of(self: CrawlTables, crawl: int, digests: Any) -> dict[str, tuple[str, str]]:
        queries.append((crawl, list(digests)))
        return real(self, crawl, digests)

    monkeypatch.setattr(CrawlTables, "payloads_of", payloads_of)
    keys = [(crawl_id, "sha1:A"), (crawl_id, "sha1:B"), (other, "sha1:B"), (crawl_id, "sha1:A")]

    async def main() -> list[Any]:
        batcher = payload_batcher()
        try:
            asks = [batcher.ask(thread.with_store, key) for key in keys]
            return await asyncio.gather(*asks)
        finally:
            await batcher.close()

    found = asyncio.run(main())
    assert found == [(f"{SEED}1", "d1"), None, ("http://b.test/", "d2"), (f"{SEED}1", "d1")]
    assert queries == [(crawl_id, ["sha1:A", "sha1:B", "sha1:A"]), (other, ["sha1:B"])]


def test_a_first_copy_lookup_that_fails_fails_only_its_own_page(
    thread: StoreThread, crawl_id: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = CrawlTables.payloads_of

    def payloads_of(self: CrawlTables, crawl: int, digests: Any) -> dict[str, tuple[str, str]]:
        if "sha1:BAD" in digests:
            raise RuntimeError("no answer for sha1:BAD")
        return real(self, crawl, digests)

    monkeypatch.setattr(CrawlTables, "payloads_of", payloads_of)

    async def main() -> list[Any]:
        batcher = payload_batcher()
        try:
            asks = [
                batcher.ask(thread.with_store, (crawl_id, digest))
                for digest in ("sha1:A", "sha1:BAD", "sha1:C")
            ]
            return await asyncio.gather(*asks, return_exceptions=True)
        finally:
            await batcher.close()

    found = asyncio.run(main())
    assert (found[0], found[2]) == (None, None)
    assert isinstance(found[1], RuntimeError)
