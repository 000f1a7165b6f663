"""A worker's claim goes out with its commit's COMMIT (``engine.claim.claim_later``).

A worker commits what finished and claims its next batch in one transaction. The plain
claim's rows are needed only after that transaction, so on PostgreSQL the claim waits in the
pipeline and goes out with the COMMIT: a batch costs two round trips (the commit's fenced
update, whose answer decides the journal rows, then everything else), not three.
"""

from __future__ import annotations

import msgspec
import pytest

from tests.integration.helpers import claim, item, job_of, success, task
from trawl.engine import claim as engine_claim
from trawl.engine.claim import TaskGate
from trawl.model.states import JobStatus
from trawl.runtime.backend import commit_and_claim, read_at_once
from trawl.store.hotpath import HotPath
from trawl.store.store import Store

PRICE = TaskGate(name="price", timeout=60.0)


@pytest.fixture(autouse=True)
def products(store: Store) -> None:
    store.register_tasks([task("price")])
    store.add_items([item(f"p{i}", "product") for i in range(5)])


def test_the_batch_is_read_after_the_commit(store: Store) -> None:
    with store.unit():
        claimed = engine_claim.claim_later(store, [PRICE], 3, "w1")
        with pytest.raises(RuntimeError, match="once its transaction has committed"):
            claimed()
    batch = claimed()
    assert sorted(j.item_id for j in batch.jobs) == ["p0", "p1", "p2"]
    for job in batch.jobs:
        view = job_of(store, job.item_id)
        assert (view.status, view.owner, view.attempt) == (JobStatus.RUNNING, "w1", 1)
    assert all(j.tags == {"product": None} for j in batch.jobs)


def test_outside_a_transaction_the_batch_is_ready_at_once(store: Store) -> None:
    batch = engine_claim.claim_later(store, [PRICE], 10, "w1")()
    assert len(batch.jobs) == 5


def test_a_task_with_rules_is_claimed_at_once(store: Store) -> None:
    """Rules read the candidates before leasing, so there is nothing to defer: the batch is
    known inside the transaction already."""
    ruled = TaskGate(name="price", timeout=60.0, weights=(1.0, 0.0, 0.0))
    with store.unit():
        batch = engine_claim.claim_later(store, [ruled], 2, "w1")()
    assert len(batch.jobs) == 2


def test_a_claim_that_fails_with_its_transaction_leases_nothing(store: Store) -> None:
    def claim_then_fail() -> None:
        with store.unit():
            engine_claim.claim_later(store, [PRICE], 5, "w1")
            raise ValueError("whatever fails the transaction after the claim")

    with pytest.raises(ValueError, match="after the claim"):
        claim_then_fail()
    assert {job_of(store, f"p{i}").status for i in range(5)} == {JobStatus.QUEUED}


POSTGRES_ONLY = pytest.mark.parametrize(
    "db_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
LATER = lambda s, n: engine_claim.claim_later(s, [PRICE], n, "w1")  # noqa: E731


# SQLite runs in-process: it has no round trips to save.
@POSTGRES_ONLY
def test_a_commit_and_claim_is_two_round_trips_on_postgresql(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = claim(store, "price", limit=2)
    trips: list[str] = []
    real = HotPath._run

    def counted(self: HotPath, raw: object, sql: str | None, params: object) -> list[object]:
        trips.append(sql or "")
        return real(self, raw, sql, params)

    monkeypatch.setattr(HotPath, "_run", counted)
    lease = read_at_once(lambda s, n: engine_claim.claim(s, [PRICE], n, "w1"))
    report, batch = commit_and_claim(
        store, [success(j) for j in running], 3, None, LATER, ["price"], "w1"
    )
    assert sorted(report.committed) == sorted(j.job_id for j in running)
    assert len(batch.jobs) == 3
    assert len(trips) == 2
    assert trips[-1] == "COMMIT"
    # The same batch claimed at once costs the claim's own round trip.
    trips.clear()
    report, batch = commit_and_claim(
        store, [success(j) for j in batch.jobs], 3, None, lease, ["price"], "w1"
    )
    assert len(report.committed) == 3
    assert len(trips) == 3


@POSTGRES_ONLY  # SQLite stores a NUL in text; PostgreSQL refuses it
def test_a_batch_with_a_refused_value_still_claims_after_its_commit(store: Store) -> None:
    """The transaction with the refused value rolls back, its claim with it; the attempts
    are committed one by one and the claim made again, on its own, and read at once."""
    running = claim(store, "price", limit=2)
    results = [success(j) for j in running]
    results[1] = msgspec.structs.replace(results[1], result='{"x": "\x00"}')
    report, batch = commit_and_claim(store, results, 3, None, LATER, ["price"], "w1")
    assert sorted(report.committed) == sorted(j.job_id for j in running)
    assert "refused a value" in report.effect_failures[running[1].job_id]
    assert len(batch.jobs) == 3
    assert {job_of(store, j.item_id).status for j in batch.jobs} == {JobStatus.RUNNING}
