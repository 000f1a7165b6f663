"""Per-host politeness shared by every worker, decided in one short transaction per fetch.

Each host has a row with the next free request start and a block (after 429/503 with
Retry-After); requests in flight are slot rows per host and per crawl. A fetch reserves the
next start (moving the host's ``next_at`` on by the delay) and slots, then sleeps until its
start; when the start is far off it takes nothing and the job moves only its ``due_at``
(``ctx.defer``), so a throttled host never holds a worker slot that other hosts could use.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Literal

from trawl.crawl import urls
from trawl.crawl.options import Options, wants_browser
from trawl.crawl.robots import Robots
from trawl.crawl.rules import Ruleset, Settings, from_json
from trawl.store.crawls import CrawlRow, CrawlTables
from trawl.store.store import Store

HOLD = 1.0  # a start at most this far off is waited for in the task; later ones defer
SLOT_MARGIN = 15.0  # a slot outlives the request timeout by this much at most
BUSY_RETRY = 0.25  # a host or crawl at its concurrency is tried again after about this
PAUSED_RETRY = 5.0  # a crawl with concurrency 0
NO_BROWSER_RETRY = 5.0  # a page for a browser, planned for a fetcher without one
# Starts are planned here but seen by the server a moment later, a new connection's a bit
# later than a kept-alive one's; a little slack keeps the spacing the server sees >= delay.
SLACK = 0.02

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
    reason: str = ""  # skip: why
    host_errors: int = 0  # fetch: the host's consecutive errors so far (a success resets)


class Gate:
    """Decides what a fetch attempt does now; caches rulesets and robots.txt per process."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rulesets: dict[tuple[int, int], Ruleset] = {}
        self._robots: dict[str, tuple[Robots, float]] = {}
        self._rng = rng or random.Random()
        self._hosts: set[str] = set()

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
        tables = store.crawls
        with store.write(soft=True):
            for done_item, done_attempt in finished:
                tables.release(done_item, done_attempt)
            at = (crawl_id, url, item_id, attempt)
            return self._begin(tables, store.clock(), *at, browser=browser)

    def _begin(
        self,
        t: CrawlTables,
        now: float,
        crawl_id: int,
        url: str,
        item_id: str,
        attempt: int,
        *,
        browser: bool = True,
    ) -> Plan:
        crawl = t.get(crawl_id)
        if crawl is None:
            return Plan(action="skip", reason="gone")
        if crawl.aborted:
            return Plan(action="park")
        ruleset = self.ruleset(t, crawl)
        settings = ruleset.settings(url)
        # Depth needs no check: pages past the limit are created skipped, never claimed.
        base = Plan(action="skip", crawl=crawl, ruleset=ruleset, settings=settings)
        if settings.skip:
            return _with(base, reason=f"rule:{ruleset.version}")
        options = Options.from_json(crawl.options)
        if not browser and wants_browser(options, settings):
            return _defer(_with(base, options=options), now + NO_BROWSER_RETRY)
        host = urls.host(url)
        delay, action = options.delay, "fetch"
        if options.robots:
            robots = self.robots(t, host, now)
            if robots is None:
                action = "robots"
            elif robots.unavailable:  # RFC 9309: disallow all while the server errs
                return _defer(_with(base, options=options), self._robots[host][1])
            elif not robots.allowed(url, settings.user_agent):
                return _with(base, reason="robots")
            else:
                delay = max(delay, capped_delay(robots, settings.user_agent, options))
        if self._rng.random() < 0.01:
            t.purge_slots(now)
        planned = _with(base, options=options, action=action)
        return self._reserve(t, now, planned, host, delay, item_id, attempt)

    def _reserve(
        self,
        t: CrawlTables,
        now: float,
        plan: Plan,
        host: str,
        delay: float,
        item_id: str,
        attempt: int,
    ) -> Plan:
        crawl, options = plan.crawl, plan.options
        if crawl is None or options is None:
            raise RuntimeError(f"an incomplete plan: {plan}")
        next_at, blocked, errors = t.host(host, known=host in self._hosts)
        self._hosts.add(host)
        if blocked is not None and blocked > now:
            return _defer(plan, blocked + self._rng.uniform(0, max(delay, 0.5)))
        if crawl.concurrency <= 0:
            return _defer(plan, now + PAUSED_RETRY)
        per_host = options.per_host or crawl.concurrency
        host_key, crawl_key = f"host:{host}", f"crawl:{crawl.id}"
        held = t.held((host_key, crawl_key), now)
        if held[host_key] >= per_host or held[crawl_key] >= crawl.concurrency:
            return _defer(plan, now + max(delay, BUSY_RETRY) * self._rng.uniform(1.0, 2.0))
        start = max(now, next_at)
        if start - now > HOLD:
            return _defer(plan, start + self._rng.uniform(0, max(delay, 0.1)))
        t.set_next(host, start + delay + (min(SLACK, delay / 10) if delay else 0.0))
        t.take([host_key, crawl_key], item_id, attempt, start + options.timeout + SLOT_MARGIN)
        action = "robots" if plan.action == "robots" else "fetch"
        return _with(plan, action=action, start_at=start, host_errors=errors)

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
        return robots

    def learned_robots(self, host: str, robots: Robots) -> None:
        self._robots[host] = (robots, robots.expires(time.time()))


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


def host_failed(store: Store, host: str, grace: float) -> float | None:
    """A 5xx, timeout or connection error on *host*: back the whole host off, longer each
    time in a row, and return until when the page should wait without spending a try.
    ``None`` once the run of errors is older than *grace* (the crawl's ``host_grace``): the
    host is down, or the page is bad, so the host is no longer held back and its pages'
    tries count again - the crawl still ends."""
    tables = store.crawls
    with store.write(soft=True):
        now = store.clock()
        counted, errors, since, blocked = tables.host_error(host, now)
        if now - since > grace:
            return None
        until = blocked if blocked is not None and blocked > now else now
        if counted:
            until = now + min(HOST_BACKOFF_MAX, HOST_BACKOFF * 2.0 ** (errors - 1))
            tables.block(host, until)
    return until


def pace_host(store: Store, host: str, delay: float) -> float | None:
    """Reserve the next start on *host* for a browser page's sub-request, *delay* after
    the one before (pages and sub-requests share the host's spacing); ``None`` while the
    host is blocked. Sub-requests take no slot: the page they belong to holds one."""
    tables = store.crawls
    with store.write(soft=True):
        now = store.clock()
        next_at, blocked, _ = tables.host(host)
        if blocked is not None and blocked > now:
            return None
        start = max(now, next_at)
        tables.set_next(host, start + delay + min(SLACK, delay / 10))
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
