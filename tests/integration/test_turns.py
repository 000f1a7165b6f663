"""Pages put aside because their host is busy get turns: each wakes just before a start of
its own, a step after the last one given, instead of all waking within a delay of the
host's next start, where all but one found it taken and were put aside again."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from tests.integration.helpers import FakeClock
from tests.support import site_crawl
from trawl.crawl import operations, politeness
from trawl.crawl.app import make_app
from trawl.crawl.frontier import Found, discover
from trawl.crawl.options import Options
from trawl.crawl.politeness import BUSY_RETRY, HOLD, IDLE, TURN_LEAD, Ask, Gate, Plan, slack
from trawl.crawl.robots import Robots
from trawl.crawl.urls import page_id
from trawl.demo.site import random_graph
from trawl.store.crawls import FETCH_TASK
from trawl.store.store import Store

HOST = "http://a.test/"
PAGES = [f"{HOST}{n}" for n in range(8)]
DELAY = 0.5
STEP = DELAY + slack(DELAY)


def approx(expected: Any) -> Any:
    """Equal to a microsecond: the clock reads about 1.7e9, past pytest.approx's relative
    tolerance."""
    return pytest.approx(expected, abs=1e-6)


def _crawl(store: Store, **options: Any) -> int:
    """A crawl of PAGES on one host, every page's job running its first attempt."""
    operations.register(store, make_app().get(FETCH_TASK).info())
    options = {"robots": False} | options
    spec = operations.CrawlSpec(seeds=(HOST,), options=Options(**options))
    made = operations.create(store, spec)
    with store.write():
        discover(store.crawls, made, HOST, [Found(url=u) for u in PAGES], store.clock())
    with store.write():
        store.db.send("UPDATE jobs SET status = 'running', attempt = 1, due_at = 1e12")
    return made


def _plan(gate: Gate, store: Store, crawl_id: int, urls: list[str]) -> list[Plan]:
    asks = [Ask(crawl_id=crawl_id, url=u, item_id=page_id(crawl_id, u), attempt=1) for u in urls]
    return gate.begin_many(store, asks)


def _book(store: Store, next_at: float) -> None:
    """The host's next free start, as other pages' reservations left it."""
    with store.write():
        store.crawls.host("a.test")
        store.crawls.set_next("a.test", next_at)


def test_pages_of_a_host_booked_past_hold_get_turns_a_step_apart(
    store: Store, clock: FakeClock
) -> None:
    crawl_id = _crawl(store, delay=DELAY)
    first_free = clock.now + 5.0
    _book(store, first_free)
    plans = _plan(Gate(random.Random(1)), store, crawl_id, PAGES[:4])
    assert [p.action for p in plans] == ["defer"] * 4
    turns = [first_free + k * STEP for k in range(4)]
    assert [p.until for p in plans] == approx([t - TURN_LEAD for t in turns])


def test_turns_given_after_the_hosts_delay_changed_are_spaced_by_the_new_one(
    store: Store, clock: FakeClock
) -> None:
    """A robots.txt fetched again (here, or by another process) with a longer Crawl-delay:
    the turns given from then on are its step apart, not the old delay's."""
    crawl_id = _crawl(store, delay=DELAY, robots=True)
    gate = Gate(random.Random(1))
    gate.learned_robots("a.test", Robots(200, "User-agent: *\nAllow: /\n"))
    first_free = clock.now + 5.0
    _book(store, first_free)
    before = _plan(gate, store, crawl_id, PAGES[:2])
    gate.learned_robots("a.test", Robots(200, "User-agent: *\nCrawl-delay: 2\n"))
    after = _plan(gate, store, crawl_id, PAGES[2:4])
    longer = 2.0 + slack(2.0)
    turns = [first_free, first_free + STEP, first_free + STEP + longer]
    turns.append(turns[-1] + longer)
    assert [p.until for p in before + after] == approx([t - TURN_LEAD for t in turns])


def test_a_page_whose_start_is_further_off_than_hold_is_put_aside_not_held(
    store: Store, clock: FakeClock
) -> None:
    """A page waiting in its task for its host's start holds a worker slot and one of the
    crawl's requests, which the crawl's other hosts could use. Further off than HOLD it is
    put aside for its turn (with a second's hold, 100 hosts at --delay 1 and 8 requests
    made 44 pages a second of the 100 their delays allowed; 93 with HOLD at 0.25 s)."""
    crawl_id = _crawl(store, delay=1.0)
    gate = Gate(random.Random(1))
    _book(store, clock.now + 0.5)
    (plan,) = _plan(gate, store, crawl_id, PAGES[:1])
    assert (plan.action, plan.until) == ("defer", approx(clock.now + 0.5 - TURN_LEAD))
    near = clock.now + HOLD - 0.01
    _book(store, near)
    (plan,) = _plan(gate, store, crawl_id, PAGES[1:2])
    assert (plan.action, plan.start_at) == ("fetch", approx(near))


def test_a_request_begun_early_to_connect_is_held_and_woken_that_much_earlier(
    store: Store, clock: FakeClock
) -> None:
    """A host that closes its connections: its requests are begun their setup's time
    before their start (Ask.lead). A start that far beyond HOLD is still waited for, and
    a page put aside wakes that much before its turn: woken TURN_LEAD before, it could not
    connect by its start, missed it and took the host's next one."""
    crawl_id = _crawl(store, delay=1.0)
    gate = Gate(random.Random(1))
    lead = 0.3

    def ask(url: str) -> Ask:
        return Ask(crawl_id=crawl_id, url=url, item_id=page_id(crawl_id, url), attempt=1, lead=lead)

    near = clock.now + HOLD + lead - 0.01
    _book(store, near)
    (held,) = gate.begin_many(store, [ask(PAGES[0])])
    assert (held.action, held.start_at) == ("fetch", approx(near))
    far = clock.now + 5.0
    _book(store, far)
    (aside,) = gate.begin_many(store, [ask(PAGES[1])])
    assert (aside.action, aside.until) == ("defer", approx(far - TURN_LEAD - lead))


def test_a_request_begun_early_to_connect_gets_an_idle_hosts_start_no_sooner_than_its_lead(
    store: Store, clock: FakeClock
) -> None:
    """It cannot go out before it has connected: given the idle host's start at now, it
    missed it, and took a new start, a delay later if another page reserved the next."""
    crawl_id = _crawl(store, delay=DELAY, per_host=4)  # the earlier pages' slots stay taken
    gate = Gate(random.Random(1))
    lead = 0.3

    def ask(url: str, lead: float) -> Ask:
        return Ask(crawl_id=crawl_id, url=url, item_id=page_id(crawl_id, url), attempt=1, lead=lead)

    (early,) = gate.begin_many(store, [ask(PAGES[0], lead)])
    assert (early.action, early.start_at) == ("fetch", approx(clock.now + lead))
    clock.now += 10.0  # the host idle again
    (plain,) = gate.begin_many(store, [ask(PAGES[1], 0.0)])
    assert (plain.action, plain.start_at) == ("fetch", approx(clock.now))
    clock.now += 10.0
    _book(store, clock.now + lead / 2)  # a start booked further off than the lead stands
    (booked,) = gate.begin_many(store, [ask(PAGES[2], lead)])
    assert booked.start_at == approx(clock.now + lead)
    _book(store, clock.now + 1.5 * lead)  # (within HOLD + lead: held for)
    (later,) = gate.begin_many(store, [ask(PAGES[3], lead)])
    assert later.start_at == approx(clock.now + 1.5 * lead)


@pytest.mark.parametrize("options", [{"delay": 0.0}, {"delay": DELAY, "robots": True}])
def test_no_delay_or_robots_txt_first_leaves_an_idle_hosts_start_at_now(
    store: Store, clock: FakeClock, options: dict[str, Any]
) -> None:
    """Without a delay a request goes out once connected, waiting for no start, and
    robots.txt is not begun early: for neither does the lead push the start off."""
    crawl_id = _crawl(store, **options)
    url = PAGES[0]
    ask = Ask(crawl_id=crawl_id, url=url, item_id=page_id(crawl_id, url), attempt=1, lead=0.3)
    (plan,) = Gate(random.Random(1)).begin_many(store, [ask])
    expected = "robots" if options.get("robots") else "fetch"
    assert (plan.action, plan.start_at) == (expected, approx(clock.now))


def test_a_page_woken_for_its_turn_reserves_that_start(store: Store, clock: FakeClock) -> None:
    crawl_id = _crawl(store, delay=DELAY)
    gate = Gate(random.Random(1))
    _book(store, clock.now + 5.0)
    first, second = _plan(gate, store, crawl_id, PAGES[:2])
    clock.now = first.until  # claimed when due; the host's starts were taken up to its turn
    (woken,) = _plan(gate, store, crawl_id, PAGES[:1])
    assert (woken.action, woken.start_at) == ("fetch", approx(first.until + TURN_LEAD))
    clock.now = second.until
    (woken,) = _plan(gate, store, crawl_id, PAGES[1:2])
    assert (woken.action, woken.start_at) == ("fetch", approx(second.until + TURN_LEAD))


def test_a_page_of_a_host_at_its_request_limit_waits_for_a_turn(
    store: Store, clock: FakeClock
) -> None:
    delay = 0.2  # the second start is within HOLD: held for, not put aside for it
    step = delay + slack(delay)
    assert step <= HOLD
    crawl_id = _crawl(store, delay=delay, per_host=2)
    plans = _plan(Gate(random.Random(1)), store, crawl_id, PAGES[:5])
    assert [p.action for p in plans] == ["fetch", "fetch", "defer", "defer", "defer"]
    # The host's next free start comes after the two reserved; each waiting page gets one.
    turns = [clock.now + (2 + k) * step for k in range(3)]
    assert [p.until for p in plans[2:]] == approx([t - TURN_LEAD for t in turns])


def test_a_busy_host_without_a_delay_is_tried_again_after_busy_retry(
    store: Store, clock: FakeClock
) -> None:
    """No delay, no spacing to give turns by: the page comes back after BUSY_RETRY to 2x,
    at random, not all at one moment (turns of no delay would all be the same start)."""
    crawl_id = _crawl(store, delay=0.0, per_host=1)
    busy = _plan(Gate(random.Random(1)), store, crawl_id, PAGES[:4])[1:]
    assert [p.action for p in busy] == ["defer"] * 3
    assert all(clock.now + BUSY_RETRY <= p.until <= clock.now + 2 * BUSY_RETRY for p in busy)
    assert len({p.until for p in busy}) == 3


def test_a_turn_is_never_sooner_than_busy_retry(store: Store, clock: FakeClock) -> None:
    """A host at its limit whose next start has passed (a slow response holds the slot):
    the page does not come straight back to find the slot still held."""
    crawl_id = _crawl(store, delay=0.05, per_host=1)
    gate = Gate(random.Random(1))
    (fetching,) = _plan(gate, store, crawl_id, PAGES[:1])
    clock.now += 1.0  # the request is still out
    (waiting,) = _plan(gate, store, crawl_id, PAGES[1:2])
    assert (fetching.action, waiting.action) == ("fetch", "defer")
    assert waiting.until == approx(clock.now + BUSY_RETRY)


def test_another_crawl_of_the_host_does_not_queue_behind_the_first_ones_turns(
    store: Store, clock: FakeClock
) -> None:
    """Turns are per crawl: a crawl cancelled with its pages' turns given leaves no line
    that another crawl of the host would wait behind."""
    gate = Gate(random.Random(1))
    first = _crawl(store, delay=DELAY)
    next_free = clock.now + 5.0
    _book(store, next_free)
    given = _plan(gate, store, first, PAGES)
    assert given[-1].until > next_free + 3.0
    second = _crawl(store, delay=DELAY)
    (plan,) = _plan(gate, store, second, PAGES[:1])
    assert plan.until == approx(next_free - TURN_LEAD)


def test_turns_start_afresh_once_the_host_stood_idle_past_idle(
    store: Store, clock: FakeClock
) -> None:
    """The pages given turns did not come (their jobs reset, or run by another process's
    gate): the host's next reservation after it stood idle drops the turns given, and a
    page put aside later is not queued behind them."""
    crawl_id = _crawl(store, delay=DELAY)
    gate = Gate(random.Random(1))
    _book(store, clock.now + 5.0)
    _plan(gate, store, crawl_id, PAGES[:6])  # turns up to 5 + 6 steps away
    clock.now += 5.0 + IDLE + 0.5  # past the first turn and IDLE more: nobody came
    now = clock.now
    started = _plan(gate, store, crawl_id, PAGES[6:7])
    assert (started[0].action, started[0].start_at) == ("fetch", now)
    booked = now + HOLD + 0.1  # before the last turn given (5 + 5 steps: 1.1 s after now)
    _book(store, booked)
    (later,) = _plan(gate, store, crawl_id, PAGES[7:8])
    assert later.until == approx(booked - TURN_LEAD)


@pytest.mark.timing  # a crawl whose pages wait for a host's starts: runs alone
def test_a_one_host_crawl_plans_each_page_about_once_per_request(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host of 40 pages, each linking to 20 others, at 0.25 s a request and 16 requests
    in flight: the pages past HOLD of the host's starts are put aside. Each comes back
    for its turn rather than about every second: at most two deferrals a request (34 of
    them for 42 requests here; 136 before turns)."""
    actions: Counter[str] = Counter()
    real = politeness.Gate.begin_many

    def begin_many(self: Gate, store: Store, asks: Any, browser: bool = True) -> list[Plan]:
        plans = real(self, store, asks, browser)
        actions.update(p.action for p in plans)
        return plans

    monkeypatch.setattr(politeness.Gate, "begin_many", begin_many)
    delay = 0.25
    site = random_graph(40, seed=3, out_degree=20, hosts=1)
    options = Options(robots=True, delay=delay, timeout=5.0)
    served = site_crawl.crawl_served(db_url, site, options, depth=4, concurrency=16)
    site_crawl.check_exact_once_spaced(db_url, served, depth=4, delay=delay)
    requests = len(served.log)
    assert actions["fetch"] + actions["robots"] == requests
    assert actions["defer"] <= 2 * requests, actions
