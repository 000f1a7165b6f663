"""The pipeline protocol against a real tracker, spoken frame by frame as docs/protocol.md
says: handshake, hello, claim, commit, renew, reads, errors, routing and operator advice."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.integration.helpers import item
from tests.live.helpers import run
from tests.pipelines.conftest import Raw, Tracker, headers, hello, join, task_spec
from trawl.model import wire
from trawl.model.errors import DatabaseUnavailable
from trawl.store.pipelines import Pipelines
from trawl.store.store import Store


def seed(tracker: Tracker, count: int, tag: str = "t") -> list[str]:
    ids = [f"item:{n:03d}" for n in range(count)]
    with Store(tracker.db) as store:
        store.add_items([item(i, tag, n=n) for n, i in enumerate(ids)])
    return ids


def done(job: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A successful attempt at *job* as the wire carries it."""
    return {
        "job_id": job["job_id"],
        "item_id": job["item_id"],
        "task": job["task"],
        "attempt": job["attempt"],
        "outcome": "success",
        "version": "1",
        "result": '{"ok": true}',
        **extra,
    }


def jobs_of(db: str) -> dict[str, Any]:
    with Store(db) as store, store.read():
        return {e.item_id: e for e in store.journal(limit=10_000) if e.kind == "job.done"}


@pytest.mark.parametrize(
    ("who", "token"),
    [("p1", "wrong-token"), ("nobody", None), ("", None)],
)
def test_a_bad_or_missing_token_is_refused_with_401_and_nothing_else(
    tracker: Tracker, who: str, token: str | None
) -> None:
    tracker.pipeline("p1")
    real = tracker.tokens["p1"]

    async def main() -> None:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(
                tracker.ws + wire.PATH, additional_headers=headers(who, token or real)
            ):
                pass
        assert refused.value.response.status_code == 401

    run(main)
    with Store(tracker.db) as store:
        assert store.pipelines.require("p1").connected_at is None


@pytest.mark.parametrize(
    ("first", "code", "reason"),
    [
        ("not json", 4400, "JSON hello"),
        ({**hello(), "v": 99}, 4426, "protocol version 1, not 99"),
        ({**hello(), "slots": 0}, 4400, "slots"),
        ({**hello(), "extra": 1}, 4400, "unknown field `extra`"),
        ({**hello(), "tasks": [{"name": "x"}]}, 4400, "version"),
    ],
)
def test_a_bad_hello_closes_with_a_code_saying_why(
    tracker: Tracker, first: Any, code: int, reason: str
) -> None:
    token = tracker.pipeline("p1")

    async def main() -> None:
        async with connect(tracker.ws + wire.PATH, additional_headers=headers("p1", token)) as ws:
            raw = Raw(ws)
            await raw.send(first)
            with pytest.raises(ConnectionClosed) as closed:
                await raw.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == code
            assert reason in closed.value.rcvd.reason

    run(main)


def test_claim_run_commit_through_the_tracker(tracker: Tracker) -> None:
    tracker.pipeline("p1", slots=8)
    ids = seed(tracker, 10)

    async def main() -> None:
        raw, welcome = await join(tracker, "p1", slots=16)
        assert welcome["pipeline"] == "p1"
        assert welcome["slots"] == 8  # the lower of the hello's and the pipeline's
        assert welcome["tasks"] == ["work"]
        claimed = await raw.ok("claim", {"limit": 100})
        jobs = claimed["jobs"]
        assert len(jobs) == 8  # capped at its slots
        assert {j["item_id"] for j in jobs} <= set(ids)
        assert all(j["data"]["n"] == int(j["item_id"][-3:]) for j in jobs)
        effects = [{"kind": "patch_data", "id": jobs[0]["item_id"], "patch": {"seen": True}}]
        results = [done(jobs[0], effects=effects)] + [done(j) for j in jobs[1:]]
        second = await raw.ok("claim", {"limit": 8, "results": results})
        assert sorted(second["report"]["committed"]) == sorted(j["job_id"] for j in jobs)
        assert len(second["jobs"]) == 2
        item = await raw.ok("item", {"id": jobs[0]["item_id"]})
        assert item["data"] == {"n": jobs[0]["data"]["n"], "seen": True}
        meta = await raw.ok("metadata", {"task": "work", "id": jobs[1]["item_id"]})
        assert meta == {"ok": True}
        report = await raw.ok("commit", {"results": [done(j) for j in second["jobs"]]})
        assert len(report["committed"]) == 2
        await raw.ws.close()

    run(main)
    assert sorted(jobs_of(tracker.db)) == ids


def test_a_commit_repeated_after_a_lost_reply_is_a_no_op_not_a_second_commit(
    tracker: Tracker,
) -> None:
    tracker.pipeline("p1")
    seed(tracker, 2)

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        jobs = (await raw.ok("claim", {"limit": 2}))["jobs"]
        effects = [{"kind": "create_item", "id": "child:1", "tags": [["t2", None]]}]
        first = [done(jobs[0], effects=effects), done(jobs[1])]
        assert len((await raw.ok("commit", {"results": first}))["committed"]) == 2
        again = await raw.ok("commit", {"results": first})  # as after a reconnect
        assert sorted(again["committed"]) == sorted(j["job_id"] for j in jobs)
        assert again.get("stale", []) == []
        await raw.ws.close()

    run(main)
    with Store(tracker.db) as store:
        kinds = [e.kind for e in store.journal(limit=1000)]
    assert kinds.count("job.done") == 2
    assert kinds.count("item.created") == 3  # two seeded, one child: created once


def test_a_pipeline_cannot_commit_or_renew_what_it_was_not_given(tracker: Tracker) -> None:
    tracker.pipeline("p1")
    tracker.pipeline("p2")
    seed(tracker, 1)

    async def main() -> None:
        one, _ = await join(tracker, "p1")
        two, _ = await join(tracker, "p2", owner="other:2:def")
        job = (await one.ok("claim", {"limit": 1}))["jobs"][0]
        lease = [job["job_id"], job["attempt"], 600]
        assert (await two.ok("renew", {"leases": [lease]}))["kept"] == []
        forged = await two.ok("commit", {"results": [done(job, result='{"forged": 1}')]})
        assert forged["stale"] == [job["job_id"]]
        # The same with a claim: checked in the transaction that commits and claims.
        forged_claim = {"limit": 1, "results": [done(job, result='{"forged": 2}')]}
        claimed = await two.ok("claim", forged_claim)
        assert claimed["report"]["stale"] == [job["job_id"]]
        assert claimed["report"].get("committed", []) == []
        assert (await one.ok("renew", {"leases": [lease]}))["kept"] == [job["job_id"]]
        await one.ok("commit", {"results": [done(job)]})
        for raw in (one, two):
            await raw.ws.close()

    run(main)
    with Store(tracker.db) as store:
        assert store.get_metadata("work", "item:000") == {"ok": True}


@pytest.mark.parametrize(
    ("request_", "field", "says"),
    [
        ({"limit": "many"}, "limit", "Expected `int`"),
        ({"limit": 1, "results": [{"job_id": 1}]}, "results[0]", "missing required field"),
        (
            {
                "limit": 0,
                "results": [
                    done(
                        {"job_id": 1, "item_id": "a", "task": "work", "attempt": 1},
                        effects=[{"kind": "teleport"}],
                    )
                ],
            },
            "results[0].effects[0].kind",
            "Invalid value 'teleport'",
        ),
        (
            {
                "limit": 0,
                "results": [
                    done(
                        {"job_id": 1, "item_id": "a", "task": "work", "attempt": 1},
                        effects=[{"kind": "custom", "name": "rm -rf"}],
                    )
                ],
            },
            "results[0].effects[0]",
            "no custom effect is named 'rm -rf'",
        ),
        (
            {
                "limit": 0,
                "results": [
                    done(
                        {"job_id": 1, "item_id": "a", "task": "work", "attempt": 1}, result="[1, 2]"
                    )
                ],
            },
            "results[0].result",
            "a result must be an object",
        ),
        (
            {
                "limit": 0,
                "results": [
                    done(
                        {"job_id": 1, "item_id": "a", "task": "work", "attempt": 1},
                        effects=[{"kind": "create_item", "id": "bad\u0000id"}],
                    )
                ],
            },
            "results[0].effects[0]",
            "control character",
        ),
    ],
)
def test_a_bad_request_is_answered_naming_the_field_and_the_session_goes_on(
    tracker: Tracker, request_: dict[str, Any], field: str, says: str
) -> None:
    tracker.pipeline("p1")
    seed(tracker, 1)

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        reply = await raw.request("claim", request_)
        assert reply["status"] == "error", reply
        assert reply["payload"]["field"] == field, reply
        assert says in reply["payload"]["message"], reply
        assert len((await raw.ok("claim", {"limit": 1}))["jobs"]) == 1  # still serving
        await raw.ws.close()

    run(main)
    assert jobs_of(tracker.db) == {}  # nothing of the refused requests was applied


def test_frames_that_are_not_requests_get_an_error_and_an_unknown_type_too(
    tracker: Tracker,
) -> None:
    tracker.pipeline("p1")

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        await raw.send("{not json")
        assert (await raw.recv())["payload"]["type"] == "BadFrame"
        await raw.send({"type": "claim"})  # no seq
        error = await raw.recv()
        assert error["seq"] is None
        assert "seq" in error["payload"]["message"]
        reply = await raw.request("teleport", {})
        assert reply["payload"]["type"] == "UnknownAction"
        assert (await raw.ok("ping", {"in_use": 0}))["time"] > 0
        await raw.ws.close()

    run(main)


def test_a_fault_of_the_trackers_is_answered_as_unavailable_and_the_session_goes_on(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tracker.pipeline("p1")
    seed(tracker, 1)

    async def broken(self: object, request: object) -> object:
        raise RuntimeError("a bug in the tracker")

    monkeypatch.setattr("trawl.server.pipelines.session.PipelineSession._ping", broken)

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        reply = await raw.request("ping", {"in_use": 0})
        assert reply["status"] == "error", reply
        assert reply["payload"]["type"] == "Unavailable", reply  # the pipeline asks again later
        assert "RuntimeError" in reply["payload"]["message"], reply
        assert len((await raw.ok("claim", {"limit": 1}))["jobs"]) == 1  # still serving
        await raw.ws.close()

    with caplog.at_level("ERROR", logger="trawl.pipelines"):
        run(main)
    assert "a bug in the tracker" in caplog.text  # the traceback is in the tracker's log


def test_routing_follows_tags_and_match_only_and_a_removed_tag_at_once(
    tracker: Tracker,
) -> None:
    tracker.pipeline("normal")
    tracker.pipeline("eu", tags=("eu",))
    tracker.pipeline("eu-only", tags=("eu",), match_only=True)
    tasks = [task_spec("plain"), task_spec("euwork", pipeline_tag="eu")]

    async def main() -> None:
        seen = {}
        for name in ("normal", "eu", "eu-only"):
            raw, welcome = await join(tracker, name, tasks=tasks, owner=f"{name}:1:x")
            seen[name] = welcome["tasks"]
            await raw.ws.close()
        assert seen == {
            "normal": ["plain"],  # untagged work only
            "eu": ["plain", "euwork"],  # its tag's work, and untagged work
            "eu-only": ["euwork"],  # match-only: its tag's work only
        }
        raw, _ = await join(tracker, "eu", tasks=tasks)
        with Store(tracker.db) as store:
            store.pipelines.update("eu", remove_tags=["eu"])
        routing = await raw.advisory("routing")  # the session re-reads its row
        assert routing["payload"]["tasks"] == ["plain"]
        await raw.ws.close()

    run(main, timeout=60)


def test_drain_stops_claims_and_rotating_the_token_revokes_the_session(
    tracker: Tracker,
) -> None:
    tracker.pipeline("p1")
    seed(tracker, 3)

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        with Store(tracker.db) as store:
            store.pipelines.update("p1", draining=True)
        await raw.advisory("drain")
        assert (await raw.ok("claim", {"limit": 3}))["jobs"] == []
        with Store(tracker.db) as store:
            store.pipelines.update("p1", draining=False)
            await raw.advisory("undrain")
            assert len((await raw.ok("claim", {"limit": 3}))["jobs"]) == 3
            store.pipelines.rotate("p1", store.clock())
        revoked = await raw.advisory("revoked")
        assert "new token" in revoked["payload"]["reason"]
        with pytest.raises(ConnectionClosed):
            await raw.recv(timeout=10)

    run(main, timeout=60)


def test_a_session_long_joined_still_notices_its_token_rotated(tracker: Tracker) -> None:
    # The watch re-reads the pipeline's row every 0.2 s here. It used to return after each
    # read, and a daemon that returns five times within a minute is given up: about four
    # seconds in (with the restarts' backoff), the session stopped watching its row.
    tracker.pipeline("p1")

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        await asyncio.sleep(6.0)
        with Store(tracker.db) as store:
            store.pipelines.rotate("p1", store.clock())
        revoked = await raw.advisory("revoked", timeout=5)
        assert "new token" in revoked["payload"]["reason"]

    run(main, timeout=60)


def test_a_session_still_notices_its_token_rotated_after_its_row_could_not_be_read(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The database is away for a while (each re-read fails, 0.2 s apart here). A failing
    # re-read used to end the watch; five of them within a minute gave it up for the rest
    # of the session, so a token rotated after the outage went unnoticed.
    tracker.pipeline("p1")
    real_get = Pipelines.get
    failing = {"on": False, "reads": 0}

    def get(self: Pipelines, pipeline_id: str) -> Any:
        if failing["on"]:
            failing["reads"] += 1
            raise DatabaseUnavailable("cannot reach the database at test: it is down")
        return real_get(self, pipeline_id)

    monkeypatch.setattr(Pipelines, "get", get)

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        failing["on"] = True
        for _ in range(100):  # 12 reads: well past the five restarts a daemon is allowed
            if failing["reads"] >= 12:
                break
            await asyncio.sleep(0.1)
        failing["on"] = False
        assert failing["reads"] >= 12, "the watch stopped re-reading while the database was away"
        with Store(tracker.db) as store:
            store.pipelines.rotate("p1", store.clock())
        revoked = await raw.advisory("revoked", timeout=5)
        assert "new token" in revoked["payload"]["reason"]

    with caplog.at_level(logging.INFO, logger="trawl.server.pipelines.session"):
        run(main, timeout=60)
    said = [r.getMessage() for r in caplog.records if "row" in r.getMessage()]
    assert sum("cannot re-read its row" in m for m in said) == 1  # once an outage, not a read
    assert any("its row is read again" in m for m in said)


def test_a_second_session_of_a_pipeline_replaces_the_first(tracker: Tracker) -> None:
    tracker.pipeline("p1")

    async def main() -> None:
        old, _ = await join(tracker, "p1")
        new, _ = await join(tracker, "p1")
        told = await old.advisory("disconnect")
        assert "newer session" in told["payload"]["reason"]
        with pytest.raises(ConnectionClosed):
            await old.recv(timeout=10)
        assert (await new.ok("ping", {}))["time"] > 0
        await new.ws.close()

    run(main)


def test_lapsed_leases_of_its_tasks_are_listed_for_the_pipeline_to_settle(
    tracker: Tracker,
) -> None:
    tracker.pipeline("p1")
    seed(tracker, 1)

    async def main() -> None:
        raw, _ = await join(tracker, "p1", tasks=[task_spec(timeout=0.2)])
        job = (await raw.ok("claim", {"limit": 1}))["jobs"][0]
        await asyncio.sleep(0.5)
        lapsed = (await raw.ok("lapsed", {}))["jobs"]
        assert [(j["job"]["job_id"], j["owner"]) for j in lapsed] == [
            (job["job_id"], "pipeline:p1:test:1:abc")
        ]
        await raw.ws.close()

    run(main)


def test_crawl_pace_moves_a_missed_start_that_is_the_hosts_last(tracker: Tracker) -> None:
    """crawl.pace with ``after`` (the start a request missed) and ``lead``: the start moves
    to the tracker's now plus the lead when no later one was reserved, and the host's next
    start moves with it; a start reserved after it keeps the request from moving; a lead
    past its bound is refused by name."""
    tracker.pipeline("p1")

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        pace = {"host": "a.test", "delay": 0.5}
        missed = (await raw.ok("crawl.pace", pace))["start"]
        moved = (await raw.ok("crawl.pace", pace | {"after": missed, "lead": 0.05}))["start"]
        assert missed + 0.05 <= moved < missed + 0.5  # not a whole delay later
        following = (await raw.ok("crawl.pace", pace))["start"]
        assert following >= moved + 0.5  # the host's spacing moved on with it
        again = (await raw.ok("crawl.pace", pace | {"after": moved}))["start"]
        assert again >= following + 0.5  # `following` was reserved after it: no move
        reply = await raw.request("crawl.pace", pace | {"after": again, "lead": 2.0})
        assert reply["status"] == "error", reply
        assert reply["payload"]["field"] == "lead", reply
        await raw.ws.close()

    run(main)


def test_a_burst_of_frames_as_a_fast_crawl_pipeline_sends_is_not_slowed(
    tracker: Tracker, caplog: pytest.LogCaptureFixture
) -> None:
    """A crawl pipeline sends two frames a page: 500 frames a second held one to about 230
    pages a second. 900 frames at once are within the tracker's burst, however fast sent."""
    tracker.pipeline("p1")

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        replies = await raw.requests("clock", [{}] * 900)
        assert {r["status"] for r in replies} == {"ok"}
        await raw.ws.close()

    run(main)
    assert "are slowed" not in caplog.text


def test_crawl_host_failed_takes_the_page_and_refuses_fields_it_does_not_know(
    tracker: Tracker,
) -> None:
    """crawl.host_failed names the page (crawl and url) so the tracker can tell the page's
    own failures from its host's; an unknown field is refused as such, which is how a
    pipeline learns that a tracker from before takes the host alone (RemotePort)."""
    tracker.pipeline("p1")

    async def main() -> None:
        raw, _ = await join(tracker, "p1")
        failed = {"host": "a.test", "grace": 60.0}
        page = failed | {"crawl": 1, "url": "http://a.test/x"}
        assert (await raw.ok("crawl.host_failed", page))["until"] is not None
        reply = await raw.request("crawl.host_failed", failed | {"page": "http://a.test/x"})
        assert reply["status"] == "error", reply
        assert "unknown field" in reply["payload"]["message"], reply
        await raw.ws.close()

    run(main)
