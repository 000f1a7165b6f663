"""Per-host politeness shared by every worker, decided in one short transaction per fetch.

Each host has a row with the next free request start and a block (after 429/503 with
Retry-After); requests in flight are slot rows per host and per crawl. A fetch reserves the
next start (moving the host's ``next_at`` on by the delay) and slots, then sleeps until its
start; when the start is far off it takes nothing and the job moves only its ``due_at``
(``ctx.defer``), so a throttled host never holds a worker slot that other hosts could use.

On SQLite (one writer at a time) the gate reads the host and its slots, decides and writes.
On PostgreSQL many processes share a host's row, and a lock held across round trips to a
busy Python process made them wait for each other (two processes on one host crawled at
half the speed of one): there each reservation is one statement (store/crawls.py,
``_RESERVE_POSTGRES``) sent with the COMMIT, the same rules in SQL, and the plan is read
from what it found after the transaction is over.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trawl.crawl import urls
from trawl.crawl.options import Options, options_of, wants_browser
from trawl.crawl.robots import Robots
from trawl.crawl.rules import Ruleset, Settings, from_json
from trawl.store.crawls import CrawlRow, CrawlTables
from trawl.store.store import Store

# A start at most this far off is waited for in the task; later ones defer. A page waiting
# for its start holds one of the crawl's requests and a worker slot, so a long hold starves
# the other hosts: at 1 s, a crawl of 100 hosts at --delay 1 with 8 requests made 44 pages
# a second of the 100 its hosts allowed, 93 at 0.25 s. Deferred, a page wakes TURN_LEAD
# before its turn and then waits in the task. Both grow by the time a request is begun
# early to connect (Ask.lead).
HOLD = 0.25
# A task waits this long for one of its crawl's requests in this process (crawl/inflight.py)
# before it defers: no page can go before one is given back, so waiting costs no host.
PERMIT_WAIT = 1.0
# A host whose next free start lies this far in the past has stood idle: the pages given
# its turns did not come.
IDLE = 1.0
SLOT_MARGIN = 15.0  # a slot outlives the request timeout by this much at most
BUSY_RETRY = 0.25  # a host or crawl at its concurrency is tried again after about this
# A page of a host whose robots.txt another page is fetching plans again after about this,
# waiting in its task (the fetch takes a round trip or two), not put back in the queue.
ROBOTS_PENDING = "robots-pending"
ROBOTS_POLL = 0.05
ROBOTS_WAIT_MAX = 5.0  # waited that long in all, the page is put back in the queue
PAUSED_RETRY = 5.0  # a crawl with concurrency 0
# A page put aside because its host is busy (its starts booked past HOLD, or its requests in
# flight at the limit) gets a turn: the host's next start that no page this gate put aside
# was given yet, one step after the last one given. It wakes this long before its turn, to
# be claimed and planned in time, and reserves the start then. Without turns such pages
# woke at random within a delay of the host's next start and most found it taken: a
# one-host crawl of 3,000 known pages at a 0.5 s delay planned 238 times a request.
TURN_LEAD = 0.1
NO_BROWSER_RETRY = 5.0  # a page for a browser, planned for a fetcher without one
# Starts are planned here but seen by the server a moment later, a new connection's a bit
# later than a kept-alive one's; a little slack keeps the spacing the server sees >= delay.
SLACK = 0.02
# ... and never less than this: half of it is how late after its start a request may still
# go out (pacing.latest_send), and a task asleep until its start wakes up to a millisecond
# or two late (the event loop's timers have a millisecond's grain). With a tenth of a 20 ms
# delay, 1 ms, nearly every start was missed and a crawl at --delay 0.02 never began.
MIN_SLACK = 0.005


def after_block(until: float, delay: float, rng: random.Random) -> float:
    """When a page held off by its host's block *until* comes back: at random within a
    delay (at least half a second) after it, so the host's pages do not all return at once
    and none is always first."""
    return until + rng.uniform(0, max(delay, 0.5))


def slack(delay: float) -> float:
    """What a host's next start adds to its *delay* after this one (none without a delay)."""
    return min(SLACK, max(delay / 10, MIN_SLACK)) if delay > 0 else 0.0


Action = Literal["fetch", "robots", "skip", "defer", "park"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    action: Action
    crawl: CrawlRow | None = None
    options: Options | None = None
    ruleset: Ruleset | None = None
    settings: Settings | None = None
    start_at: float = 0.0  # fetch/robots: when the request may start
    until: float = 0.0  # defer: when to try again
    reason: str = ""  # skip: why; defer: ROBOTS_PENDING (wait in the task, plan again)
    host_errors: int = 0  # fetch: the host's consecutive errors so far (a success resets)
    delay: float = 0.0  # fetch/robots: the host's delay, its robots.txt Crawl-delay included


@dataclass(frozen=True, kw_only=True, slots=True)
class Ask:
    """One fetch attempt asking the gate for its plan; *finished*: (item, attempt) of
    requests done whose slots can go."""

    crawl_id: int
    url: str
    item_id: str
    attempt: int
    finished: tuple[tuple[str, int], ...] = ()
    # How long before its start the request is begun, to connect by then (crawl/setups.py):
    # a start this much further off is still held for, and a page put aside wakes this
    # much earlier for its turn. Without it, a page of a host that closes its connections
    # came back TURN_LEAD before its start, less than its connection took, and missed it.
    lead: float = 0.0


class _Tables:
    """The gate's reads within one transaction, each row read once: the crawl, and on
    SQLite a host's row and the slots in use, which this transaction's takes raise. Its
    writes (a host's next start, the slots taken) are kept here and go in :meth:`flush`,
    one statement for all the slots and one a host, however many plans took them."""

    def __init__(self, t: CrawlTables, known_hosts: set[str]) -> None:
        self.t = t
        self._known = known_hosts
        # Hosts whose row this transaction made sure of: known once it commits, not before
        # (rolled back, the row it inserted is gone again).
        self.learned: set[str] = set()
        self._crawls: dict[int, CrawlRow | None] = {}
        self._hosts: dict[str, tuple[float, float | None, int]] = {}
        self._held: dict[str, int] = {}
        self._running: dict[tuple[str, int], bool] = {}
        self._moved: set[str] = set()  # hosts whose next start (in _hosts) is to write
        self._taken: list[tuple[str, str, int, float]] = []  # (key, item, attempt, until)

    def crawl(self, crawl_id: int) -> CrawlRow | None:
        if crawl_id not in self._crawls:
            self._crawls[crawl_id] = self.t.get(crawl_id)
        return self._crawls[crawl_id]

    def host(self, host: str) -> tuple[float, float | None, int]:
        found = self._hosts.get(host)
        if found is None:
            known = host in self._known or host in self.learned
            found = self._hosts[host] = self.t.host(host, known=known)
            self.learned.add(host)
        return found

    def held(self, keys: tuple[str, str], now: float) -> dict[str, int]:
        missing = [k for k in keys if k not in self._held]
        if missing:
            self._held |= self.t.held(missing, now)
        return {k: self._held[k] for k in keys}

    def running(self, item_id: str, attempt: int) -> bool:
        """Whether the page's fetch job is running *attempt* (read once a transaction)."""
        key = (item_id, attempt)
        if key not in self._running:
            self._running[key] = self.t.running(item_id, attempt)
        return self._running[key]

    def set_next(self, host: str, next_at: float) -> None:
        _, blocked, errors = self._hosts[host]
        self._hosts[host] = (next_at, blocked, errors)
        self._moved.add(host)

    def take(self, keys: tuple[str, str], item_id: str, attempt: int, until: float) -> None:
        for key in keys:
            self._held[key] += 1
            self._taken.append((key, item_id, attempt, until))

    def flush(self) -> None:
        """Write what the plans decided (every read since came from this object, which
        already counts it)."""
        for host in self._moved:
            self.t.set_next(host, self._hosts[host][0])
        self.t.take(self._taken)
        self._moved, self._taken = set(), []


class Gate:
    """Decides what a fetch attempt does now; caches rulesets and robots.txt per process."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rulesets: dict[tuple[int, int], Ruleset] = {}
        self._robots: dict[str, tuple[Robots, float]] = {}
        # Hosts whose robots.txt a page of this gate is fetching: until when, and which page
        # (its item and attempt; a later plan of it, after a missed start, is still the
        # one). Other pages of the host wait for it rather than fetch it too, while its job
        # runs that attempt: one that gave up (its starts missed) or was lost lets the next
        # page fetch it, instead of holding the host back until the fetch could have ended.
        self._robots_pending: dict[str, tuple[float, str, int]] = {}
        self._rng = rng or random.Random()
        self._hosts: set[str] = set()
        # (crawl, host) -> the last turn given and the step it was given by. Per crawl: a
        # cancelled crawl's turns, never taken, hold back no other crawl's pages of the host.
        # The next turn is the current step on, so a delay or Crawl-delay that changed
        # spaces the turns given from then on by its own step.
        self._turns: dict[tuple[int, str], tuple[float, float]] = {}

    def begin(
        self,
        store: Store,
        crawl_id: int,
        url: str,
        item_id: str,
        attempt: int,
        finished: list[tuple[str, int]],
        browser: bool = True,
    ) -> Plan:
        """Plan the attempt; first free the slots of *finished* requests (item, attempt):
        a request's slots go as soon as it is done, not when its job commits. A fetcher
        without a *browser* (a remote pipeline that said none) gets no page that wants
        one: it is deferred, for a fetcher with a browser to take."""
        ask = Ask(crawl_id=crawl_id, url=url, item_id=item_id, attempt=attempt)
        ask = dataclasses.replace(ask, finished=tuple(finished))
        return self.begin_many(store, [ask], browser=browser)[0]

    def begin_many(
        self,
        store: Store,
        asks: Sequence[Ask],
        browser: bool = True,
        check: Callable[[], None] | None = None,
    ) -> list[Plan]:
        """Plan several attempts in one transaction, in order, as :meth:`begin` would one
        after another: each sees the starts and slots the ones before it took. *check*
        runs first in that transaction (a tracker's check that the asker holds each page):
        what it raises rolls the transaction back, nothing planned."""
        tables = store.crawls
        postgres = not store.db.is_sqlite
        rows: list[list[Any]] = []
        with store.write(soft=True):
            if check is not None:
                check()
            tables.release_many([done for ask in asks for done in ask.finished])
            now = store.clock()
            view = _Tables(tables, self._hosts)
            if self._rng.random() < 0.01 * len(asks):
                tables.purge_slots(now)
                self._turns = {k: t for k, t in self._turns.items() if t[0] + t[1] > now}
            made: list[Plan | _Wanted] = []
            for ask in asks:
                planned = self._begin(view, now, ask, browser=browser)
                if isinstance(planned, _Wanted) and not postgres:
                    planned = self._reserve(view, now, planned)
                made.append(planned)
            view.flush()
            wanted = [w for w in made if isinstance(w, _Wanted)]
            if wanted:  # PostgreSQL: reserved by the server, read after the COMMIT
                tables.lock_hosts(list({w.host for w in wanted}), known=self._hosts)
                view.learned.update(w.host for w in wanted)
                rows = tables.reserve_later([w.params(now) for w in wanted])
        self._hosts |= view.learned
        found = iter(rows)
        plans = [self._reserved(now, p, next(found)) if isinstance(p, _Wanted) else p for p in made]
        if self._robots_pending:  # (only while some host's robots.txt is being fetched)
            for ask, plan in zip(asks, plans, strict=True):
                self._fetching_robots(ask, plan)
        return plans

    def _fetching_robots(self, ask: Ask, plan: Plan) -> None:
        """After planning: a robots.txt fetch that got its start is pending until it can
        have ended; one that did not get it (deferred) is pending no more."""
        host = urls.host(ask.url)
        pending = self._robots_pending.get(host)
        if pending is None or pending[1] != ask.item_id:
            return
        if plan.action == "robots" and plan.options is not None:
            until = plan.start_at + plan.options.timeout + SLOT_MARGIN
            self._robots_pending[host] = (until, pending[1], pending[2])
        else:
            self._robots_pending.pop(host, None)

    def _begin(self, t: _Tables, now: float, ask: Ask, *, browser: bool = True) -> Plan | _Wanted:
        crawl = t.crawl(ask.crawl_id)
        if crawl is None:
            return Plan(action="skip", reason="gone")
        if crawl.aborted:
            return Plan(action="park")
        url = ask.url
        ruleset = self.ruleset(t.t, crawl)
        settings = ruleset.settings(url)
        # Depth needs no check: pages past the limit are created skipped, never claimed.
        base = Plan(action="skip", crawl=crawl, ruleset=ruleset, settings=settings)
        if settings.skip:
            return _with(base, reason=f"rule:{ruleset.version}")
        options = options_of(crawl)
        if not browser and wants_browser(options, settings):
            return _defer(_with(base, options=options), now + NO_BROWSER_RETRY)
        host = urls.host(url)
        delay, action = options.delay, "fetch"
        if options.robots:
            robots = self.robots(t.t, host, now)
            if robots is None:
                # One attempt fetches it; the others the host's new links brought at once
                # come back once it is known (each would otherwise fetch it, a delay apart).
                pending = self._robots_pending.get(host)
                if (
                    pending is not None
                    and pending[0] > now
                    and pending[1] != ask.item_id
                    and t.running(pending[1], pending[2])
                ):
                    wait = max(delay, ROBOTS_POLL) * self._rng.uniform(1.0, 1.5)
                    waiting = _with(base, options=options, reason=ROBOTS_PENDING)
                    return _defer(waiting, min(now + wait, pending[0]))
                self._robots_pending[host] = (now + HOLD, ask.item_id, ask.attempt)
                action = "robots"
            elif robots.unavailable:  # RFC 9309: disallow all while the server errs
                return _defer(_with(base, options=options), self._robots[host][1])
            elif not robots.allowed(url, settings.user_agent):
                return _with(base, reason="robots")
            else:
                delay = max(delay, capped_delay(robots, settings.user_agent, options))
        planned = _with(base, options=options, action=action)
        return _Wanted(planned, crawl, options, host, delay, ask)

    def _reserve(self, t: _Tables, now: float, w: _Wanted) -> Plan:
        """SQLite (one writer at a time): read the host and its slots, decide, reserve."""
        next_at, blocked, errors = t.host(w.host)
        held = dict.fromkeys(w.keys, 0)
        if (blocked is None or blocked <= now) and w.crawl.concurrency > 0:
            held = t.held(w.keys, now)
        decided = self._decide(now, w, next_at, blocked, held[w.keys[0]], held[w.keys[1]])
        if isinstance(decided, Plan):
            return decided
        t.set_next(w.host, decided + w.step)
        t.take(w.keys, w.ask.item_id, w.ask.attempt, decided + w.span)
        return w.fetch(decided, errors)

    def _reserved(self, now: float, w: _Wanted, rows: list[Any]) -> Plan:
        """PostgreSQL: the plan from what the server read and whether it reserved."""
        next_at, blocked, errors, on_host, on_crawl, start = rows[0]
        if start is not None:
            self._started(w, float(next_at), now)
            return w.fetch(float(start), int(errors))
        decided = self._decide(now, w, float(next_at), blocked, int(on_host), int(on_crawl))
        if isinstance(decided, Plan):
            return decided
        # The server's arithmetic said no where Python's says yes (a start at HOLD exactly):
        # take the server's word; nothing was reserved.
        return _defer(w.plan, now + BUSY_RETRY)

    def _decide(
        self,
        now: float,
        w: _Wanted,
        next_at: float,
        blocked: float | None,
        on_host: int,
        on_crawl: int,
    ) -> Plan | float:
        """A deferral, or the start to reserve: the same rules as _RESERVE_POSTGRES."""
        plan, delay, crawl = w.plan, w.delay, w.crawl
        if blocked is not None and blocked > now:
            return _defer(plan, after_block(blocked, delay, self._rng))
        if crawl.concurrency <= 0:
            return _defer(plan, now + PAUSED_RETRY)
        start = max(w.earliest(now), next_at)
        if on_crawl >= crawl.concurrency or (on_host >= w.per_host and delay <= 0):
            return _defer(plan, now + max(delay, BUSY_RETRY) * self._rng.uniform(1.0, 2.0))
        if on_host >= w.per_host:  # (not before its slot is free: at least BUSY_RETRY)
            return _defer(plan, max(self._turn(w, start) - w.wake, now + BUSY_RETRY))
        if start - now > w.hold:
            return _defer(plan, self._turn(w, start) - w.wake)
        self._started(w, next_at, now)
        return start

    def _turn(self, w: _Wanted, start: float) -> float:
        """The next start of *w*'s host no page this gate put aside was given yet."""
        key = (w.crawl.id, w.host)
        last = self._turns.get(key)
        turn = start if last is None else max(start, last[0] + w.step)
        self._turns[key] = (turn, w.step)
        return turn

    def _started(self, w: _Wanted, next_at: float, now: float) -> None:
        """A start was reserved for *w*: if the host had stood idle past IDLE, the pages
        given its turns did not come (their crawl's pages were reset, or taken by another
        process), and later ones would wait behind turns nobody takes: start afresh."""
        if next_at < now - IDLE:
            self._turns.pop((w.crawl.id, w.host), None)

    def ruleset(self, t: CrawlTables, crawl: CrawlRow) -> Ruleset:
        key = (crawl.id, crawl.ruleset)
        found = self._rulesets.get(key)
        if found is None:
            found = Ruleset(crawl.ruleset, from_json(t.ruleset(crawl.id, crawl.ruleset)))
            self._rulesets[key] = found
        return found

    def robots(self, t: CrawlTables, host: str, now: float) -> Robots | None:
        cached = self._robots.get(host)
        if cached is not None and cached[1] > now:
            return cached[0]
        row = t.robots(host)
        if row is None:
            return None
        robots = Robots(row[0], row[1])
        expires = robots.expires(row[2])
        if expires <= now:
            return None
        self._robots[host] = (robots, expires)
        self._robots_pending.pop(host, None)  # fetched (here, or by another process)
        return robots

    def learned_robots(self, host: str, robots: Robots) -> None:
        self._robots[host] = (robots, robots.expires(time.time()))
        self._robots_pending.pop(host, None)


@dataclass(frozen=True, slots=True)
class _Wanted:
    """An attempt that may fetch if its host and crawl have room: the reservation asked."""

    plan: Plan
    crawl: CrawlRow
    options: Options
    host: str
    delay: float
    ask: Ask

    @property
    def keys(self) -> tuple[str, str]:
        return (f"host:{self.host}", f"crawl:{self.crawl.id}")

    @property
    def per_host(self) -> int:
        return self.options.per_host or self.crawl.concurrency

    @property
    def hold(self) -> float:
        """How far off a start may be and still be waited for in the task."""
        return HOLD + self.ask.lead

    @property
    def wake(self) -> float:
        """How long before its turn a page put aside comes back."""
        return TURN_LEAD + self.ask.lead

    def earliest(self, now: float) -> float:
        """The soonest start to give. A request begun its lead early cannot go out before
        that lead from now: given an idle host's start at now, it was still connecting at
        its start, missed it, and took the host's next one, a delay later if another page
        had reserved it. Not for robots.txt, which is not begun early, nor without a
        delay, where a request goes out as soon as it is connected."""
        early = self.plan.action != "robots" and self.delay > 0
        return now + self.ask.lead if early else now

    @property
    def step(self) -> float:
        """How far the host's next start moves past this one."""
        return self.delay + slack(self.delay)

    @property
    def span(self) -> float:
        """How long after its start the slot counts at most."""
        return self.options.timeout + SLOT_MARGIN

    def params(self, now: float) -> dict[str, Any]:
        host_key, crawl_key = self.keys
        return {
            "host": self.host,
            "host_key": host_key,
            "crawl_key": crawl_key,
            "now": now,
            "earliest": self.earliest(now),
            "concurrency": self.crawl.concurrency,
            "per_host": self.per_host,
            "hold": self.hold,
            "step": self.step,
            "span": self.span,
            "item_id": self.ask.item_id,
            "attempt": self.ask.attempt,
        }

    def fetch(self, start: float, errors: int) -> Plan:
        action = "robots" if self.plan.action == "robots" else "fetch"
        return _with(self.plan, action=action, start_at=start, host_errors=errors, delay=self.delay)


def capped_delay(robots: Robots, agent: str, options: Options) -> float:
    """The Crawl-delay robots.txt asks, no more than the crawl's ``max_crawl_delay``."""
    return min(robots.delay(agent), options.max_crawl_delay)


def _with(plan: Plan, **changes: Any) -> Plan:
    fields = {name: getattr(plan, name) for name in Plan.__dataclass_fields__}
    return Plan(**(fields | changes))


def _defer(plan: Plan, until: float) -> Plan:
    return _with(plan, action="defer", until=until)


HOST_BACKOFF = 1.0  # seconds a host backs off after its first error, doubling
HOST_BACKOFF_MAX = 300.0


def host_failed(
    store: Store,
    host: str,
    grace: float,
    *,
    crawl_id: int | None = None,
    url: str | None = None,
) -> float | None:
    """A 5xx, timeout or connection error on *host*: back the whole host off, longer each
    time in a row, and return until when the page should wait without spending a try.
    ``None`` once the run of errors is older than *grace* (the crawl's ``host_grace``): the
    host is down, or the page is bad, so the host is no longer held back and its pages'
    tries count again - the crawl still ends.

    Also ``None``, with the host neither blocked nor counted, when the page *url* of crawl
    *crawl_id* failed in the same way on its last attempt and the host has answered since
    (its run of errors ended): the error is the page's, not the host's. Any answer ends a
    run, so without this one page that always fails, on a host that serves its other pages,
    began a new run each time, never spent a try while the host had pages left, and held
    the whole host back a second or more at every attempt (a 2,000-page crawl of one host
    took 371 s instead of 5, asking the bad page 126 times). A page once found at fault
    stays so while it goes on failing (its last attempt spent a try): else two bad pages
    outliving their host's good ones opened a run between them that no answer would end,
    and waited out the grace, each failure doubling the host's block."""
    tables = store.crawls
    with store.write(soft=True):
        now = store.clock()
        if (
            crawl_id is not None
            and url is not None
            and tables.failed_last(crawl_id, url)
            and (
                tables.host_errors(host) == 0 or tables.tries_spent(urls.page_id(crawl_id, url)) > 0
            )
        ):
            return None
        counted, errors, since, blocked = tables.host_error(host, now)
        if now - since > grace:
            return None
        until = blocked if blocked is not None and blocked > now else now
        if counted:
            until = now + min(HOST_BACKOFF_MAX, HOST_BACKOFF * 2.0 ** (errors - 1))
            tables.block(host, until)
    return until


def pace_host(
    store: Store, host: str, delay: float, after: float | None = None, lead: float = 0.0
) -> float | None:
    """Reserve the next start on *host*, *delay* after the one before (pages and
    sub-requests share the host's spacing), for a browser page's sub-request or a request
    that missed its start; ``None`` while the host is blocked. Sub-requests take no slot:
    the page they belong to holds one.

    *after* is the start the request missed, when it has one. If no later start on the
    host was reserved since, that start moves to now (*lead* later, the time the answer
    takes to reach the asker) and the host's next start moves with it: the request goes
    out as soon as it is ready, not a whole delay later. A request made late by setting up
    a connection to a distant host otherwise used two starts, and a host that closes its
    connections (or one crawled slower than its keep-alive) at half its delay's rate."""
    tables = store.crawls
    step = delay + slack(delay)
    with store.write(soft=True):
        now = store.clock()
        next_at, blocked, _ = tables.host(host)
        if blocked is not None and blocked > now:
            return None
        # The host's next start is *after*'s own step on when *after* is the last start
        # reserved; any later reservation put it a whole step further.
        # (A missed start is past, or barely ahead on a pipeline's clock: nothing else moves.)
        if after is not None and after <= now + step and next_at < after + step * 1.5:
            start = max(now + lead, after)
        else:
            start = max(now, next_at)
        tables.set_next(host, start + step)
    return start


def block_host(store: Store, host: str, until: float) -> None:
    """Hold off every request to *host* until *until* (after a 429 or a 503)."""
    with store.write(soft=True):
        store.crawls.block(host, until)


def store_robots(
    store: Store, host: str, robots: tuple[int, str], not_before: float, item_id: str, attempt: int
) -> None:
    """Keep a host's robots.txt for every worker, free the slot its fetch used, and keep the
    next request on the host *not_before* (the robots.txt fetch's start + Crawl-delay)."""
    tables = store.crawls
    with store.write(soft=True):
        tables.put_robots(host, robots[0], robots[1], store.clock())
        next_at, _, _ = tables.host(host)
        if not_before > next_at:
            tables.set_next(host, not_before)
        tables.release(item_id, attempt)
