"""The crawl tables' contract, on SQLite and PostgreSQL alike: crawls and their rulesets,
the frontier's depths, per-host politeness, robots.txt, host backoff, and the WARC
bookkeeping a fetch commits (through the same claim and commit the workers use)."""

from __future__ import annotations

import random

import pytest
from msgspec.structs import replace

from tests.integration.helpers import FakeClock, success
from trawl.crawl import operations
from trawl.crawl.app import make_app
from trawl.crawl.frontier import Discover, Found, discover
from trawl.crawl.operations import CrawlSpec, RulesetConflict
from trawl.crawl.options import Options
from trawl.crawl.outcomes import Fetched, Parked
from trawl.crawl.politeness import Gate, block_host, host_failed, store_robots
from trawl.crawl.rules import make_rule
from trawl.crawl.urls import page_id
from trawl.engine.claim import TaskGate, claim
from trawl.engine.commit import commit
from trawl.model import effects as fx
from trawl.model.states import Outcome
from trawl.store.crawls import FETCH_TASK
from trawl.store.sql import q
from trawl.store.store import Store

SEED = "http://a.test/"
NO_ROBOTS = Options(robots=False)


def _crawl(store: Store, *, depth: int | None = 2, options: Options = NO_ROBOTS) -> int:
    operations.register(store, make_app().get(FETCH_TASK).info())
    return operations.create(store, CrawlSpec(seeds=(SEED,), depth=depth, options=options))


def _found(store: Store, crawl_id: int, parent: str | None, *urls: str) -> None:
    with store.write():
        discover(store.crawls, crawl_id, parent, [Found(url=u) for u in urls], store.clock())


def _depths(store: Store, crawl_id: int) -> dict[str, tuple[int, str | None]]:
    with store.read():
        return {r["url"]: (r["depth"], r["skip"]) for r in store.crawls.pages(crawl_id)}


def _claim_pages(store: Store, limit: int = 100) -> list[str]:
    jobs = claim(store, [TaskGate(name=FETCH_TASK, timeout=60.0)], limit, "w1").jobs
    return sorted(job.data["url"] for job in jobs)


def test_a_new_crawl_has_its_seed_at_depth_zero_and_ruleset_one(store: Store) -> None:
    crawl_id = _crawl(store)
    crawl = operations.get(store, crawl_id)
    assert (crawl.seeds, crawl.depth_limit, crawl.ruleset, crawl.aborted) == ([SEED], 2, 1, False)
    assert _depths(store, crawl_id) == {SEED: (0, None)}
    version, rules = operations.rules(store, crawl_id)
    assert version == 1
    assert rules, "the seeds' hosts are accepted by a first rule"
    assert operations.find(store, CrawlSpec(seeds=(SEED,), depth=2, options=NO_ROBOTS)) == crawl
    assert _claim_pages(store) == [SEED]


def test_a_shorter_path_lowers_a_depth_and_brings_back_pages_past_the_limit(
    store: Store,
) -> None:
    crawl_id = _crawl(store, depth=2)
    a, b, c, deep = (f"{SEED}{name}" for name in ("a", "b", "c", "deep"))
    _found(store, crawl_id, SEED, a)
    _found(store, crawl_id, a, b)
    _found(store, crawl_id, b, c)
    _found(store, crawl_id, c, deep)
    depths = _depths(store, crawl_id)
    assert depths[c] == (3, "depth")
    assert depths[deep] == (4, "depth")
    _found(store, crawl_id, SEED, c)  # a shortcut: c is one hop from the seed
    depths = _depths(store, crawl_id)
    assert depths[c] == (1, None), "lowered, and no longer past the limit"
    assert depths[deep] == (2, None), "its descendants are lowered with it"
    claimable = _claim_pages(store)
    assert c in claimable
    assert deep in claimable


def test_a_rule_edit_makes_a_new_version_and_a_stale_edit_is_refused(store: Store) -> None:
    crawl_id = _crawl(store)
    skip = make_rule("skip", r"/private/")
    assert operations.edit_rules(store, crawl_id, add=[skip], ensure=1, note="no private") == 2
    version, rules = operations.rules(store, crawl_id)
    assert version == 2
    assert rules[-1]["kind"] == "skip"
    with pytest.raises(RulesetConflict, match="not 1"):
        operations.edit_rules(store, crawl_id, add=[skip], ensure=1)
    with pytest.raises(operations.CrawlNotFound):
        operations.edit_rules(store, 999, add=[skip])
    assert operations.rules(store, crawl_id)[0] == 2, "a refused edit changes nothing"


def test_abort_parks_pages_and_resume_makes_them_due(store: Store) -> None:
    crawl_id = _crawl(store)
    _found(store, crawl_id, SEED, f"{SEED}a", f"{SEED}b")
    assert operations.abort(store, crawl_id) == 3
    assert _claim_pages(store) == []
    assert operations.resume(store, crawl_id) == 3
    assert len(_claim_pages(store)) == 3


def test_a_host_spaces_its_starts_by_the_delay_and_caps_requests_in_flight(
    store: Store, clock: FakeClock
) -> None:
    options = Options(robots=False, delay=0.2, per_host=1)  # the next start is within HOLD
    crawl_id = _crawl(store, options=options)
    other = f"{SEED}a"
    _found(store, crawl_id, SEED, other)
    assert _claim_pages(store) == [SEED, other], "slots count only running attempts"
    gate = Gate(random.Random(1))
    first = gate.begin(store, crawl_id, SEED, page_id(crawl_id, SEED), 1, [])
    assert (first.action, first.start_at) == ("fetch", clock.now)
    busy = gate.begin(store, crawl_id, other, page_id(crawl_id, other), 1, [])
    assert busy.action == "defer", "one request in flight per host"
    # The first request is done: its slot is freed; the next start waits for the delay.
    done = [(first_id(crawl_id), 1)]
    second = gate.begin(store, crawl_id, other, page_id(crawl_id, other), 1, done)
    assert second.action == "fetch"
    assert second.start_at >= first.start_at + 0.2


def first_id(crawl_id: int) -> str:
    return page_id(crawl_id, SEED)


def test_a_blocked_host_defers_until_its_block_ends(store: Store, clock: FakeClock) -> None:
    crawl_id = _crawl(store)
    block_host(store, "a.test", clock.now + 30)
    plan = Gate(random.Random(1)).begin(store, crawl_id, SEED, first_id(crawl_id), 1, [])
    assert plan.action == "defer"
    assert plan.until >= clock.now + 30


def test_host_errors_back_off_longer_each_time_until_the_grace_runs_out(
    store: Store, clock: FakeClock
) -> None:
    _crawl(store)
    start = clock.now
    first = host_failed(store, "a.test", grace=60)
    assert first is not None
    assert host_failed(store, "a.test", grace=60) == first, "errors while blocked count once"
    clock.now = first
    second = host_failed(store, "a.test", grace=60)
    assert second is not None
    assert second - clock.now > first - start > 0
    clock.now = start + 61
    assert host_failed(store, "a.test", grace=60) is None, "past the grace, tries count again"
    with store.write():
        store.crawls.host_ok("a.test")
        assert store.crawls.host("a.test")[2] == 0


@pytest.mark.parametrize(
    ("outcome", "status", "own"),
    [
        ("retry", 503, True),  # a 5xx again
        ("retry", None, True),  # no answer again (timeout, connection dropped)
        ("retry", 429, False),  # throttled last time: a block, not an error of its own
        ("done", 200, False),  # fetched last time (a revisit): a new error is the host's
    ],
)
def test_a_page_failing_again_while_its_host_answers_others_spends_its_tries(
    store: Store, clock: FakeClock, outcome: str, status: int | None, own: bool
) -> None:
    crawl_id = _crawl(store)
    bad = f"{SEED}bad"
    first = host_failed(store, "a.test", grace=60, crawl_id=crawl_id, url=bad)
    assert first is not None, "a first error is the host's: the page waits, free"
    with store.write():
        row = _attempt(crawl_id, 1, digest="sha1:AAAA", warc=("c.warc.gz", 0, 1))
        store.crawls.add_attempts([row | {"url": bad, "outcome": outcome, "status_code": status}])
    clock.now = first
    if own:  # no answer since: an outage, so the page still waits without a try
        assert host_failed(store, "a.test", grace=60, crawl_id=crawl_id, url=bad) is not None
        clock.now += 10
    with store.write():
        store.crawls.host_ok("a.test")  # another page of the host answered
        _, _, errors_before = store.crawls.host("a.test")
    again = host_failed(store, "a.test", grace=60, crawl_id=crawl_id, url=bad)
    with store.read():
        _, blocked, errors = store.crawls.host("a.test", known=True)
    if own:
        assert again is None, "the page's own failure spends a try"
        assert (errors, errors_before) == (0, 0), "and is not counted against the host"
        assert blocked is None or blocked <= clock.now, "nor holds the host back"
    else:
        assert again is not None
        assert again > clock.now
        assert errors == 1
    # Another page's first error is the host's, whatever this page did.
    other = host_failed(store, "a.test", grace=60, crawl_id=crawl_id, url=f"{SEED}other")
    assert other is not None


@pytest.mark.parametrize("spent", [1, 0])
def test_a_page_at_fault_stays_so_while_no_answer_comes_between(
    store: Store, clock: FakeClock, spent: int
) -> None:
    """Two pages that always fail outlive their host's other pages: one opens a run of
    errors that no answer will end. A page whose last attempt failed at host level and
    spent a try (it was found at fault) spends its next try too, rather than waiting for
    the run to end until the grace runs out; a page that never spent one waits, as in an
    outage."""
    crawl_id = _crawl(store)
    bad = f"{SEED}bad"
    _found(store, crawl_id, SEED, bad)
    with store.write():
        row = _attempt(crawl_id, 1, digest="sha1:AAAA", warc=("c.warc.gz", 0, 1))
        store.crawls.add_attempts([row | {"url": bad, "outcome": "retry", "status_code": 503}])
        store.db.send(
            q("UPDATE jobs SET fail_count = :n WHERE item_id = :id"),
            {"n": spent, "id": page_id(crawl_id, bad)},
        )
    opened = host_failed(store, "a.test", grace=60, crawl_id=crawl_id, url=f"{SEED}other")
    assert opened is not None, "the other bad page's first error opens a run"
    clock.now = opened
    again = host_failed(store, "a.test", grace=60, crawl_id=crawl_id, url=bad)
    with store.read():
        _, blocked, errors = store.crawls.host("a.test", known=True)
    if spent:
        assert again is None, "the page's own failure spends a try"
        assert errors == 1, "and is not counted against the host"
        assert blocked == opened, "nor holds the host back longer"
    else:
        assert again is not None
        assert again > clock.now
        assert errors == 2


def test_robots_txt_is_kept_for_every_worker(store: Store, clock: FakeClock) -> None:
    crawl_id = _crawl(store, options=Options())
    body = "User-agent: *\nDisallow: /private/\n"
    store_robots(store, "a.test", (200, body), clock.now + 1, first_id(crawl_id), 1)
    with store.read():
        assert store.crawls.robots("a.test") == (200, body, clock.now)
    private = f"{SEED}private/x"
    gate = Gate(random.Random(1))
    plan = gate.begin(store, crawl_id, private, page_id(crawl_id, private), 1, [])
    assert (plan.action, plan.reason) == ("skip", "robots")


def test_a_fetch_commits_its_attempt_payload_links_and_frees_its_slot(
    store: Store, clock: FakeClock
) -> None:
    crawl_id = _crawl(store)
    gate = Gate(random.Random(1))
    (job,) = claim(store, [TaskGate(name=FETCH_TASK, timeout=60.0)], 10, "w1").jobs
    plan = gate.begin(store, crawl_id, SEED, job.item_id, job.attempt, [])
    assert plan.action == "fetch"
    record = _attempt(crawl_id, job.attempt, digest="sha1:AAAA", warc=("c.warc.gz", 1234, 567))
    found = _discover(crawl_id, f"{SEED}a", f"{SEED}b")
    done = Fetched(
        item_id=job.item_id,
        attempt=job.attempt,
        record=record,
        payload=(crawl_id, "sha1:AAAA", SEED, "2026-11-24T00:00:00Z"),
        discover=found,
        host_ok="a.test",
    )
    report = commit(store, [success(job, {"status": 200}, effects=(fx.Custom(effect=done),))])
    assert report.committed == [job.job_id]
    with store.read():
        assert store.crawls.payloads(crawl_id) == {"sha1:AAAA": (SEED, "2026-11-24T00:00:00Z")}
        assert store.crawls.payload(crawl_id, "sha1:AAAA") == (SEED, "2026-11-24T00:00:00Z")
        assert store.crawls.payload(crawl_id, "sha1:BBBB") is None
        assert store.crawls.payload(crawl_id + 1, "sha1:AAAA") is None
        first = (SEED, "2026-11-24T00:00:00Z")
        assert store.crawls.payloads_of(crawl_id, ["sha1:BBBB", "sha1:AAAA"]) == {
            "sha1:AAAA": first
        }
        assert store.crawls.payloads_of(crawl_id, []) == {}
        assert store.crawls.payloads_of(crawl_id + 1, ["sha1:AAAA"]) == {}
        (attempt,) = store.crawls.attempts(crawl_id)
        held = store.crawls.held(["host:a.test", f"crawl:{crawl_id}"], clock.now)
    assert (attempt["warc_file"], attempt["warc_offset"], attempt["warc_length"]) == (
        "c.warc.gz",
        1234,
        567,
    )
    assert held == {"host:a.test": 0, f"crawl:{crawl_id}": 0}
    assert _depths(store, crawl_id)[f"{SEED}a"] == (1, None)


def test_an_effect_that_fails_undoes_the_whole_commit(store: Store) -> None:
    crawl_id = _crawl(store)
    (job,) = claim(store, [TaskGate(name=FETCH_TASK, timeout=60.0)], 10, "w1").jobs
    bad = Fetched(
        item_id=job.item_id,
        attempt=job.attempt,
        record={"crawl_id": crawl_id},  # missing columns: the database refuses it
        discover=_discover(crawl_id, f"{SEED}a"),
    )
    report = commit(store, [success(job, {"status": 200}, effects=(fx.Custom(effect=bad),))])
    assert job.job_id in report.effect_failures
    with store.read():
        assert store.crawls.attempts(crawl_id) == []
    assert f"{SEED}a" not in _depths(store, crawl_id), "nothing of the failed effect stayed"


def test_a_parked_page_waits_for_its_crawl_to_resume(store: Store) -> None:
    crawl_id = _crawl(store)
    (job,) = claim(store, [TaskGate(name=FETCH_TASK, timeout=60.0)], 10, "w1").jobs
    operations.abort(store, crawl_id)
    parked = success(job, effects=(fx.Custom(effect=Parked(item_id=job.item_id)),))
    commit(store, [replace(parked, outcome=Outcome.DEFERRED, defer_until=store.clock())])
    assert _claim_pages(store) == []
    operations.resume(store, crawl_id)
    assert _claim_pages(store) == [SEED]


def _discover(crawl_id: int, *urls: str) -> Discover:
    return Discover(crawl_id=crawl_id, parent=SEED, found=tuple(Found(url=u) for u in urls))


def _attempt(
    crawl_id: int, attempt: int, *, digest: str, warc: tuple[str, int, int]
) -> dict[str, object]:
    return {
        "crawl_id": crawl_id,
        "url": SEED,
        "attempt": attempt,
        "ruleset": 1,
        "host": "a.test",
        "started_at": 0.0,
        "elapsed": 0.1,
        "outcome": "ok",
        "status_code": 200,
        "location": None,
        "content_type": "text/html",
        "size": 100,
        "outlinks": 2,
        "outlinks_cut": 0,
        "error": None,
        "digest": digest,
        "warc_file": warc[0],
        "warc_offset": warc[1],
        "warc_length": warc[2],
    }
