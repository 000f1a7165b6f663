"""How long an idle worker waits for what its commits put back for later."""

from __future__ import annotations

from trawl.model.records import AttemptResult, CommitReport
from trawl.model.states import Outcome
from trawl.runtime.outcome import due_again_in

NOW = 1_000_000.0


def result(job_id: int, outcome: Outcome, **kw: object) -> AttemptResult:
    return AttemptResult(
        job_id=job_id,
        item_id=f"i{job_id}",
        task="t",
        attempt=1,
        outcome=outcome,
        version="1",
        ttl=None,
        **kw,  # type: ignore[arg-type]
    )


def test_nothing_put_back_is_nothing_to_wait_for() -> None:
    done = [result(1, Outcome.SUCCESS), result(2, Outcome.RELEASED)]
    assert due_again_in(done, CommitReport(committed=[1, 2]), NOW) == 0.0
    gave_up = [result(3, Outcome.FAILURE, retry_delay=None)]
    assert due_again_in(gave_up, CommitReport(committed=[3]), NOW) == 0.0


def test_the_latest_retry_or_deferral_counts() -> None:
    results = [
        result(1, Outcome.FAILURE, retry_delay=2.0),
        result(2, Outcome.DEFERRED, defer_until=NOW + 5.0),
        result(3, Outcome.DEFERRED, defer_until=NOW + 1.0),
    ]
    assert due_again_in(results, CommitReport(committed=[1, 2, 3]), NOW) == 5.0
    assert due_again_in(results, CommitReport(committed=[1, 3]), NOW) == 2.0


def test_only_committed_attempts_count_and_a_past_deferral_is_due_now() -> None:
    results = [
        result(1, Outcome.DEFERRED, defer_until=NOW + 60.0),
        result(2, Outcome.DEFERRED, defer_until=NOW - 3.0),
    ]
    report = CommitReport(committed=[2], stale=[1])  # a newer attempt's result stands
    assert due_again_in(results, report, NOW) == 0.0
