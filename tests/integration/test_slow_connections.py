"""Crawling a distant host: setting up a connection (DNS, TCP, TLS) takes a round trip or
more, often longer than a permit's margin for sending late. A request whose connection made
it late takes a new start on its host and keeps its connection; before, it gave up, aiohttp
closed the connection, and the next try needed a new one and was late again: at 50 ms to
connect and a 0.25 s delay, no request ever went out.

The distance is made where aiohttp opens a connection: each new one waits *CONNECT*
first, as a far host's handshake would; the server and the requests are real.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from typing import Any

import aiohttp
import pytest

from tests.support import site_crawl
from trawl.crawl import client, politeness, urls
from trawl.crawl import port as port_module
from trawl.crawl import robots as robots_module
from trawl.crawl.options import Options
from trawl.crawl.politeness import slack
from trawl.crawl.setups import Setups
from trawl.crawl.state import runtime
from trawl.demo.httpd import Script, SiteServer, serving
from trawl.demo.site import random_graph

pytestmark = pytest.mark.timing  # judges gaps on the wire: runs alone (scripts/check)

CONNECT = 0.1


@pytest.fixture
def distant(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every new connection takes CONNECT to set up; counts them by host."""
    made: Counter[str] = Counter()
    real = aiohttp.TCPConnector._create_connection

    async def far(self: aiohttp.TCPConnector, req: Any, *args: Any, **kwargs: Any) -> Any:
        made[req.url.host] += 1
        await asyncio.sleep(CONNECT)
        return await real(self, req, *args, **kwargs)

    monkeypatch.setattr(aiohttp.TCPConnector, "_create_connection", far)
    return made


async def _get(url: str, **paced: Any) -> client.Response:
    """*url* fetched by a session of its own, with the permit *paced* gives."""
    async with client.session(4) as session:
        return await client.fetch(session, url, headers={}, timeout=5.0, max_bytes=1 << 20, **paced)


def test_a_request_late_from_connecting_takes_a_new_start_on_the_same_connection(
    distant: Counter[str],
) -> None:
    starts: list[float] = []

    async def repace() -> float:
        await asyncio.sleep(0.02)  # the gate's next start on the host
        starts.append(time.time())
        return time.time() + 0.005

    with serving(pages=20) as server:
        url = server.url(("main", "/"))
        with pytest.raises(client.LateStart, match="past its permit"):
            asyncio.run(_get(url, not_after=time.time() + 0.01))  # no way to a new start
        assert server.requests() == []
        resp = asyncio.run(_get(url, not_after=time.time() + 0.01, repace=repace))
        resp.exchange.body.close()
        [logged] = server.requests()
    assert resp.status == 200
    assert len(starts) == 1  # one new start was enough
    assert starts[0] <= logged.at  # and the request went out after it
    assert sum(distant.values()) == 2  # the late request kept its connection


def test_a_request_that_stays_late_or_finds_its_host_blocked_is_not_sent(
    distant: Counter[str],
) -> None:
    calls: list[float] = []

    async def always_late() -> float:  # a process too starved to make any start
        calls.append(time.time())
        return time.time() - 0.001

    async def blocked() -> float:  # a 429 arrived meanwhile (pacing.paced says so)
        raise client.FetchError("127.0.0.1 asked to be left alone for now (429/503)")

    def get(url: str, repace: client.Repace) -> client.Response:
        return asyncio.run(_get(url, not_after=time.time() + 0.01, repace=repace))

    with serving(pages=20) as server:
        url = server.url(("main", "/"))
        with pytest.raises(client.LateStart, match="past its permit"):
            get(url, always_late)
        assert len(calls) == client.REPACES  # then it gave up
        with pytest.raises(client.FetchError, match="left alone"):
            get(url, blocked)
        assert server.requests() == []  # neither went out


def test_a_request_begun_early_connects_then_waits_to_be_sent_on_its_start(
    distant: Counter[str],
) -> None:
    """A request begun early (its host slow to connect) sets up its connection, reports
    how long that took, and is sent only once *ready* returns; one whose *ready* finds the
    host held off is not sent at all."""
    setups: list[float] = []
    ready_at: list[float] = []

    async def ready() -> None:
        await asyncio.sleep(0.2)  # until the request's start
        ready_at.append(time.time())

    async def held_off() -> None:
        raise client.HostHeldOff("127.0.0.1 asked to be left alone for now (429/503)")

    def get(url: str, wait: client.Ready) -> client.Response:
        not_after = time.time() + 0.3 + CONNECT
        return asyncio.run(_get(url, not_after=not_after, ready=wait, setup=setups.append))

    with serving(pages=20) as server:
        url = server.url(("main", "/"))
        with pytest.raises(client.HostHeldOff):
            get(url, held_off)
        assert server.requests() == []
        resp = get(url, ready)
        resp.exchange.body.close()
        [logged] = server.requests()
    assert resp.status == 200
    assert [s >= CONNECT for s in setups] == [True, True]
    assert ready_at[0] <= logged.at  # sent once ready said so, not as soon as connected
    assert resp.started >= ready_at[0]  # (the WARC's date: when it went, not when begun)


def test_requests_to_a_distant_host_that_closes_its_connections_go_on_their_own_starts(
    db_url: str, distant: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request needs a new connection (CONNECT, 0.1 s) and the host's later starts are
    reserved ahead (four pages at a time at 0.25 s), so a request begun on its start would
    miss it and take the host's next free one, a delay or more later: two starts a
    request. Begun early by its host's last setup, each is connected by its start: only
    the host's first requests, before any setup was seen, take a new start."""
    delay = 0.25
    late: list[float | None] = []
    real = politeness.pace_host  # as the port calls it

    def pace_host(store: Any, host: str, delay: float, after: float | None = None) -> Any:
        late.append(after)
        return real(store, host, delay, after)

    monkeypatch.setattr(port_module, "pace_host", pace_host)
    site = random_graph(16, seed=6, out_degree=3, hosts=1)
    options = Options(robots=True, delay=delay, timeout=5.0)
    served = site_crawl.crawl_served(db_url, site, options, script=Script(close=True))
    site_crawl.check_exact_once_spaced(db_url, served, depth=3, delay=delay)
    assert sum(distant.values()) == len(served.log)  # a new connection for every request
    assert len(late) <= 2, f"{len(late)} of {len(served.log)} requests took a new start"


@pytest.mark.parametrize("delay", [0.05, 0.25])
def test_a_crawl_of_distant_hosts_fetches_every_page_and_keeps_the_delay(
    db_url: str, distant: Counter[str], delay: float
) -> None:
    """At 0.05 s the connection takes longer than the delay, at 0.25 s less."""
    site = random_graph(40, seed=3, out_degree=4, hosts=2)
    with SiteServer(site, hosts=2) as server:
        options = Options(robots=True, delay=delay, timeout=5.0)
        crawl_id = site_crawl.create(db_url, server, depth=3, options=options)
        site_crawl.run(db_url, crawl_id, concurrency=4)
        log = server.requests()
        truth = {server.url(k): d for k, d in site.truth(4).items()}
        hosts = list(server.labels)
    found = site_crawl.pages(db_url, crawl_id)
    assert site_crawl.fetched(found) == {u: d for u, d in truth.items() if d <= 3}
    assert all(n == 1 for n in Counter((r.host, r.path) for r in log).values())
    for host in hosts:
        starts = sorted(r.at for r in log if r.host == host)
        close = [b - a for a, b in itertools.pairwise(starts) if b - a < delay]
        assert not close, f"{host}: request starts closer than {delay}s: {close}"
    assert sum(distant.values()) >= 2  # every host was connected to, at CONNECT each


@pytest.mark.parametrize("robots", [False, True], ids=["page", "robots.txt"])
def test_a_late_request_whose_host_is_held_off_meanwhile_waits_for_the_hold_without_failing(
    db_url: str, distant: Counter[str], monkeypatch: pytest.MonkeyPatch, robots: bool
) -> None:
    """The host's first request is late from connecting; while it waits for a new start, a
    429 holds the host off (as another page's answer would). Nothing was sent, so nothing
    failed: no attempt is recorded, no robots.txt is taken as unreachable (which would hold
    every page of the host for ERROR_TTL, made an hour here), and the page is fetched once
    the hold ends. Before, the page recorded a failed attempt and counted a host error."""
    monkeypatch.setattr(robots_module, "ERROR_TTL", 3600.0)
    hold = 0.5
    held: list[float] = []
    connect = aiohttp.TCPConnector._create_connection  # distant's

    async def held_off(self: aiohttp.TCPConnector, req: Any, *args: Any, **kwargs: Any) -> Any:
        if not held:  # the first connection: its request will be late
            held.append(time.time() + hold)
            runtime().blocked[urls.host(str(req.url))] = held[0]
        return await connect(self, req, *args, **kwargs)

    monkeypatch.setattr(aiohttp.TCPConnector, "_create_connection", held_off)
    site = random_graph(12, seed=4, out_degree=3, hosts=1)
    options = Options(robots=robots, delay=0.05, timeout=5.0)
    served = site_crawl.crawl_served(db_url, site, options)
    assert held, "no connection was made"
    site_crawl.check_exact_once_spaced(db_url, served, depth=3, delay=0.05)
    assert min(r.at for r in served.log) >= held[0] - 0.01  # nothing went out during the hold
    first = "/robots.txt" if robots else "/"
    assert sorted(served.log, key=lambda r: r.at)[0].path == first
    attempts = site_crawl.attempts(db_url, served.crawl_id)
    assert [a for a in attempts if a["outcome"] != "done"] == []


def test_a_host_that_closes_its_connections_gets_one_start_a_request(
    db_url: str, distant: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request to a distant host that keeps no connection open is late from
    connecting, when begun on its start (as here: no request is begun early, as a host's
    first is not, or one planned to start at once). The start it missed moves to when it
    is ready (no later start on the host was reserved: one page at a time, per_host 1),
    where it used to take the host's next start, a whole delay later: two starts a
    request, half the delay's rate."""
    delay = 0.25
    monkeypatch.setattr(Setups, "lead", lambda self, host: 0.0)
    moves: list[tuple[float, float | None]] = []  # (missed, given) for each late request
    real = politeness.pace_host  # as the port calls it

    def pace_host(store: Any, host: str, delay: float, after: float | None = None) -> Any:
        start = real(store, host, delay, after)
        if after is not None:
            moves.append((after, start))
        return start

    monkeypatch.setattr(port_module, "pace_host", pace_host)
    site = random_graph(10, seed=6, out_degree=3, hosts=1)
    options = Options(robots=True, delay=delay, per_host=1, timeout=5.0)
    served = site_crawl.crawl_served(db_url, site, options, script=Script(close=True))
    site_crawl.check_exact_once_spaced(db_url, served, depth=3, delay=delay)
    assert sum(distant.values()) == len(served.log)  # a new connection for every request
    assert len(moves) >= len(served.log)  # each was late from connecting ...
    step = delay + slack(delay)  # ... and went out on its missed start, moved to now
    assert [given for missed, given in moves if given is None or given >= missed + step] == []


def test_a_crawl_delay_counts_from_the_start_robots_txt_went_out_on(
    db_url: str, distant: Counter[str]
) -> None:
    """robots.txt's request is late from connecting (0.1 s) and goes out on a later start
    than its plan's; the Crawl-delay it brings spaces the host's next request from that
    start, not from the plan's, which would put the next page 0.1 s too close to it."""
    crawl_delay = 0.3
    site = random_graph(6, seed=2, out_degree=2, hosts=1)
    site.robots["main"] = f"User-agent: *\nCrawl-delay: {crawl_delay}\n"
    options = Options(robots=True, delay=0.05, timeout=5.0)
    served = site_crawl.crawl_served(db_url, site, options)
    assert sorted(served.log, key=lambda r: r.at)[0].path == "/robots.txt"
    site_crawl.check_exact_once_spaced(db_url, served, depth=3, delay=crawl_delay)
