"""Which crawls' pages a pipeline is given, and how many fetches a crawl has in flight:
mnbot's dequeue behaviours, spoken through the protocol."""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa

from tests.live.helpers import run
from tests.pipelines.conftest import Tracker, join, task_spec
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.operations import CrawlSpec
from trawl.crawl.options import Options
from trawl.crawl.politeness import HOLD, TURN_LEAD, slack
from trawl.store import migrate
from trawl.store.crawls import FETCH_TASK, CrawlTables
from trawl.store.store import Store

FETCH = [task_spec(FETCH_TASK, ("trawl.page",), timeout=60)]
NO_ROBOTS = Options(robots=False)


def crawl(db: str, name: str, **spec: Any) -> int:
    """A crawl of three seed pages on a host nobody fetches from (the tests only claim)."""
    seeds = tuple(f"http://{name}.invalid/{n}" for n in range(3))
    with Store(db) as store:
        migrate.ensure(store.db, auto=store.is_sqlite)
        operations.register(store, make_app().get(FETCH_TASK).info())
        return operations.create(store, CrawlSpec(seeds=seeds, options=NO_ROBOTS, **spec))


def _gate_rows(db: str) -> tuple[int, int]:
    """(requests in flight, hosts with a start taken) in the gate's tables."""
    with Store(db) as store, store.read():
        slots = store.db.execute(sa.text("SELECT count(*) FROM crawl_slots")).scalar_one()
        taken = store.db.execute(
            sa.text("SELECT count(*) FROM crawl_hosts WHERE next_at > 0")
        ).scalar_one()
    return int(slots), int(taken)


def crawls_of(jobs: list[dict[str, Any]]) -> set[int]:
    return {int(job["item_id"].split(":")[1]) for job in jobs}


def test_pipelines_get_pages_of_active_crawls_routed_to_them(tracker: Tracker) -> None:
    plain = crawl(tracker.db, "plain")
    eu = crawl(tracker.db, "eu", tag="eu")
    aborted = crawl(tracker.db, "aborted")
    paused = crawl(tracker.db, "paused", concurrency=0)
    with Store(tracker.db) as store:
        operations.abort(store, aborted)
    tracker.pipeline("normal")
    tracker.pipeline("tagged", tags=("eu",))
    tracker.pipeline("only-eu", tags=("eu",), match_only=True)

    async def claimed(name: str) -> set[int]:
        raw, _ = await join(tracker, name, tasks=FETCH, owner=f"{name}:1:x")
        jobs = (await raw.ok("claim", {"limit": 2}))["jobs"]
        await raw.ok("commit", {"results": [_released(j) for j in jobs]})
        await raw.ws.close()
        return crawls_of(jobs)

    async def main() -> None:
        assert await claimed("normal") == {plain}  # untagged crawls only
        assert await claimed("only-eu") == {eu}  # match-only: its tag's crawls only
        seen: set[int] = set()
        for _ in range(3):
            seen |= await claimed("tagged")
        assert seen == {plain, eu}  # its tag's crawls and untagged ones
        assert aborted not in seen
        assert paused not in seen

    run(main, timeout=60)


def test_removing_a_tag_makes_its_crawls_ineligible_at_the_next_claim(tracker: Tracker) -> None:
    crawl(tracker.db, "eu", tag="eu")
    tracker.pipeline("p1", tags=("eu",), match_only=True)

    async def main() -> None:
        raw, _ = await join(tracker, "p1", tasks=FETCH)
        first = (await raw.ok("claim", {"limit": 1}))["jobs"]
        assert len(first) == 1
        with Store(tracker.db) as store:
            store.pipelines.update("p1", remove_tags=["eu"])
        await raw.advisory("routing")
        assert (await raw.ok("claim", {"limit": 2, "results": [_released(first[0])]}))["jobs"] == []
        await raw.ws.close()

    run(main)


def test_lower_niceness_first_then_the_oldest_crawl(tracker: Tracker) -> None:
    old = crawl(tracker.db, "old")
    new = crawl(tracker.db, "new")
    urgent = crawl(tracker.db, "urgent", niceness=-5)
    tracker.pipeline("p1")

    async def main() -> None:
        raw, _ = await join(tracker, "p1", tasks=FETCH)
        order = []
        for _ in range(3):
            jobs = (await raw.ok("claim", {"limit": 3}))["jobs"]
            order.append(crawls_of(jobs))
        assert order == [{urgent}, {old}, {new}]
        await raw.ws.close()

    run(main)


def test_a_crawls_concurrency_counts_fetches_in_flight_across_pipelines(tracker: Tracker) -> None:
    crawl_id = crawl(tracker.db, "busy", concurrency=2)
    for name in ("p1", "p2"):
        tracker.pipeline(name)

    async def main() -> None:
        one, _ = await join(tracker, "p1", tasks=FETCH, owner="one:1:x")
        two, _ = await join(tracker, "p2", tasks=FETCH, owner="two:1:x")
        jobs = (await one.ok("claim", {"limit": 2}))["jobs"] + (
            await two.ok("claim", {"limit": 1})
        )["jobs"]
        assert len(jobs) == 3
        plans = []
        for raw, job in zip((one, one, two), jobs, strict=True):
            plans.append(await raw.ok("crawl.begin", _begin(crawl_id, job)))
        assert [p["action"] for p in plans] == ["fetch", "fetch", "defer"]  # 2 in flight
        done = [[jobs[0]["item_id"], jobs[0]["attempt"]]]  # one fetch finished: room again
        again = await two.ok("crawl.begin", _begin(crawl_id, jobs[2], finished=done))
        assert again["action"] == "fetch"
        for raw in (one, two):
            await raw.ws.close()

    run(main)


def test_a_pipeline_cannot_plan_a_page_it_does_not_hold(tracker: Tracker) -> None:
    crawl_id = crawl(tracker.db, "c")
    tracker.pipeline("p1")
    tracker.pipeline("p2")

    async def main() -> None:
        one, _ = await join(tracker, "p1", tasks=FETCH, owner="one:1:x")
        two, _ = await join(tracker, "p2", tasks=FETCH, owner="two:1:x")
        job = (await one.ok("claim", {"limit": 1}))["jobs"][0]
        stolen = await two.request("crawl.begin", _begin(crawl_id, job))
        assert stolen["status"] == "error"
        assert "not leased to this pipeline" in stolen["payload"]["message"]
        # Checked in the plan's own transaction: refused, it took no start and no slot.
        assert _gate_rows(tracker.db) == (0, 0)
        wrong = await one.request("crawl.begin", {**_begin(crawl_id, job), "url": "http://x/"})
        assert "is not the page" in wrong["payload"]["message"]
        robots = {"host": "a.test", "status": 200, "body": "", "not_before": 0.0}
        robots |= {"item_id": job["item_id"], "attempt": job["attempt"]}
        kept = await two.request("crawl.robots", robots)
        assert kept["status"] == "error"
        assert "not leased to this pipeline" in kept["payload"]["message"]
        for raw in (one, two):
            await raw.ws.close()

    run(main)


def test_plans_asked_at_once_are_each_answered_and_a_page_not_held_fails_alone(
    tracker: Tracker,
) -> None:
    # The tracker makes the plans a pipeline asks for together in one transaction; one it
    # may not have (another pipeline's page) fails that batch, and each is asked again alone.
    crawl_id = crawl(tracker.db, "c", concurrency=3)
    tracker.pipeline("p1")
    tracker.pipeline("p2")

    async def main() -> None:
        one, _ = await join(tracker, "p1", tasks=FETCH, owner="one:1:x")
        two, _ = await join(tracker, "p2", tasks=FETCH, owner="two:1:x")
        mine = (await one.ok("claim", {"limit": 2}))["jobs"]
        theirs = (await two.ok("claim", {"limit": 1}))["jobs"]
        asks = [_begin(crawl_id, job) for job in [mine[0], theirs[0], mine[1]]]
        replies = await one.requests("crawl.begin", asks)
        assert [r["status"] for r in replies] == ["ok", "error", "ok"], replies
        assert "not leased to this pipeline" in replies[1]["payload"]["message"]
        assert {r["payload"]["action"] for r in (replies[0], replies[2])} == {"fetch"}
        for raw in (one, two):
            await raw.ws.close()

    run(main)


def test_a_pipelines_lead_holds_a_start_that_much_further_off(tracker: Tracker) -> None:
    """crawl.begin's ``lead`` (the pipeline begins its request that long before its start,
    to connect by then): a start beyond HOLD but within HOLD plus the lead is still given
    to the page, and a page put aside wakes the lead earlier for its turn. Without a lead
    the same start puts the page aside. A lead past its bound is refused by name."""
    delay, lead = 0.8, 0.7
    step = delay + slack(delay)
    assert HOLD < step < HOLD + lead < 2 * step - HOLD
    seeds = tuple(f"http://lead.invalid/{n}" for n in range(4))
    with Store(tracker.db) as store:
        migrate.ensure(store.db, auto=store.is_sqlite)
        operations.register(store, make_app().get(FETCH_TASK).info())
        crawl_id = operations.create(
            store, CrawlSpec(seeds=seeds, options=Options(robots=False, delay=delay))
        )
    tracker.pipeline("p1")

    async def main() -> None:
        raw, _ = await join(tracker, "p1", tasks=FETCH)
        jobs = (await raw.ok("claim", {"limit": 4}))["jobs"]
        assert len(jobs) == 4
        first = await raw.ok("crawl.begin", _begin(crawl_id, jobs[0]))
        held = await raw.ok("crawl.begin", _begin(crawl_id, jobs[1]) | {"lead": lead})
        aside = await raw.ok("crawl.begin", _begin(crawl_id, jobs[2]) | {"lead": lead})
        plain = await raw.ok("crawl.begin", _begin(crawl_id, jobs[3]))
        assert [p["action"] for p in (first, held, aside, plain)] == [
            "fetch",
            "fetch",
            "defer",
            "defer",
        ]
        assert held["start_at"] == pytest.approx(first["start_at"] + step, abs=0.01)
        # Their turns are the host's next two starts, one step apart; the page with a lead
        # is woken that much earlier than the one without.
        turns = [first["start_at"] + k * step for k in (2, 3)]
        assert aside["until"] == pytest.approx(turns[0] - TURN_LEAD - lead, abs=0.01)
        assert plain["until"] == pytest.approx(turns[1] - TURN_LEAD, abs=0.01)
        too_far = await raw.request("crawl.begin", _begin(crawl_id, jobs[3]) | {"lead": 1.5})
        assert too_far["status"] == "error"
        assert "lead" in too_far["payload"]["message"], too_far
        await raw.ws.close()

    run(main)


def _begin(crawl_id: int, job: dict[str, Any], finished: list[Any] | None = None) -> dict[str, Any]:
    return {
        "crawl": crawl_id,
        "url": job["data"]["url"],
        "item_id": job["item_id"],
        "attempt": job["attempt"],
        "finished": finished or [],
    }


def _released(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "job_id": job["job_id"],
        "item_id": job["item_id"],
        "task": job["task"],
        "attempt": job["attempt"],
        "outcome": "released",
        "version": "1",
    }


def _done(job: dict[str, Any]) -> dict[str, Any]:
    return {**_released(job), "outcome": "success", "result": "{}"}


def test_a_pin_until_finished_overrides_routing_then_lifts(tracker: Tracker) -> None:
    plain = crawl(tracker.db, "plain", niceness=-10)  # better ranked, but not pinned
    pinned = crawl(tracker.db, "eu", tag="eu")  # not routed to an untagged pipeline
    tracker.pipeline("p1")
    with Store(tracker.db) as store:
        row = store.pipelines.pin("p1", pinned)
    assert (row.crawl, row.crawl_lock) == (pinned, "finished")

    async def main() -> None:
        raw, _ = await join(tracker, "p1", tasks=FETCH)
        jobs = (await raw.ok("claim", {"limit": 5}))["jobs"]
        assert crawls_of(jobs) == {pinned}
        assert len(jobs) == 3
        lifted = await raw.ok("claim", {"limit": 5, "results": [_done(j) for j in jobs]})
        assert lifted["jobs"] == []  # the crawl finished: this claim lifts the pin
        assert crawls_of((await raw.ok("claim", {"limit": 5}))["jobs"]) == {plain}
        await raw.ws.close()

    run(main)
    with Store(tracker.db) as store:
        assert store.pipelines.require("p1").crawl is None


def test_a_pinned_crawl_waiting_on_its_hosts_is_not_counted_at_every_claim(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its pages deferred (as the gate defers a page whose host is not ready), the pinned
    # crawl has nothing to claim: each empty claim asked whether it had finished, a count
    # of all its pages (28 s at 10 million pages).
    pinned = crawl(tracker.db, "pinned")
    tracker.pipeline("p1")
    with Store(tracker.db) as store:
        store.pipelines.pin("p1", pinned)
    counted: list[int] = []
    counts = CrawlTables.counts

    def counting(tables: CrawlTables, crawl_id: int) -> list[tuple[str, bool, str | None, int]]:
        counted.append(crawl_id)
        return counts(tables, crawl_id)

    monkeypatch.setattr(CrawlTables, "counts", counting)

    async def main() -> None:
        raw, _ = await join(tracker, "p1", tasks=FETCH)
        jobs = (await raw.ok("claim", {"limit": 5}))["jobs"]
        later = time.time() + 3600
        deferred = [{**_released(j), "outcome": "deferred", "defer_until": later} for j in jobs]
        assert (await raw.ok("claim", {"limit": 5, "results": deferred}))["jobs"] == []
        for _ in range(5):
            assert (await raw.ok("claim", {"limit": 5}))["jobs"] == []
        await raw.ws.close()

    run(main)
    assert counted == [pinned], "counted once, not at each of six empty claims"
    with Store(tracker.db) as store:
        assert store.pipelines.require("p1").crawl == pinned  # not finished: still pinned


def test_a_pin_forever_stays_after_its_crawl_finishes(tracker: Tracker) -> None:
    crawl(tracker.db, "plain")
    pinned = crawl(tracker.db, "pinned")
    tracker.pipeline("p1")
    with Store(tracker.db) as store:
        store.pipelines.pin("p1", pinned, "forever")

    async def main() -> None:
        raw, _ = await join(tracker, "p1", tasks=FETCH)
        jobs = (await raw.ok("claim", {"limit": 5}))["jobs"]
        assert crawls_of(jobs) == {pinned}
        await raw.ok("claim", {"limit": 5, "results": [_done(j) for j in jobs]})
        assert (await raw.ok("claim", {"limit": 5}))["jobs"] == []
        await raw.ws.close()

    run(main)
    with Store(tracker.db) as store:
        assert store.pipelines.require("p1").crawl == pinned


def test_pins_are_checked(tracker: Tracker) -> None:
    import pytest

    from trawl.model.errors import InvalidInput, NotFound

    tracker.pipeline("p1")
    with Store(tracker.db) as store:
        with pytest.raises(NotFound, match="no crawl has the id 99"):
            store.pipelines.pin("p1", 99)
        with pytest.raises(InvalidInput, match="'finished' or 'forever', not 'later'"):
            store.pipelines.pin("p1", 1, "later")
        with pytest.raises(NotFound, match="no pipeline is named 'p2'"):
            store.pipelines.pin("p2", None)


def test_pinned_slots_hold_to_their_crawl_and_the_rest_stay_routed(tracker: Tracker) -> None:
    plain = crawl(tracker.db, "plain", niceness=-10)
    pinned = crawl(tracker.db, "eu", tag="eu")  # not routed to this untagged pipeline
    tracker.pipeline("p1", slots=4)
    with Store(tracker.db) as store:
        row = store.pipelines.pin("p1", pinned, "forever", slots=2)
    assert row.crawl_slots == 2

    async def main() -> None:
        raw, _ = await join(tracker, "p1", tasks=FETCH)
        jobs = (await raw.ok("claim", {"limit": 4}))["jobs"]
        by_crawl = [int(j["item_id"].split(":")[1]) for j in jobs]
        assert sorted(by_crawl) == sorted([pinned, pinned, plain, plain])
        # the pinned slots are busy: more room goes only to the routed crawl
        more = (await raw.ok("claim", {"limit": 1}))["jobs"]
        assert crawls_of(more) == {plain}
        # one pinned page done: its slot takes the pinned crawl's last page
        again = await raw.ok(
            "claim", {"limit": 1, "results": [_done(jobs[by_crawl.index(pinned)])]}
        )
        assert crawls_of(again["jobs"]) == {pinned}
        await raw.ws.close()

    run(main)


def test_a_pipeline_asks_for_one_payloads_first_copy_or_for_them_all(tracker: Tracker) -> None:
    crawl_id = crawl(tracker.db, "c")
    with Store(tracker.db) as store, store.write():
        store.crawls.add_payload(crawl_id, "sha1:AAAA", "http://c.invalid/0", "2026-11-25T00Z")
        store.crawls.add_payload(crawl_id, "sha1:BBBB", "http://c.invalid/1", "2026-11-25T01Z")
    tracker.pipeline("p1")

    async def main() -> None:
        one, _ = await join(tracker, "p1", tasks=FETCH, owner="one:1:x")
        ask = {"crawl": crawl_id, "digest": "sha1:AAAA"}
        first = await one.ok("crawl.payloads", ask)
        assert first == {"payloads": {"sha1:AAAA": ["http://c.invalid/0", "2026-11-25T00Z"]}}
        missing = await one.ok("crawl.payloads", {**ask, "digest": "sha1:CCCC"})
        assert missing == {"payloads": {}}
        every = await one.ok("crawl.payloads", {"crawl": crawl_id})
        assert set(every["payloads"]) == {"sha1:AAAA", "sha1:BBBB"}
        await one.ws.close()

    run(main)
