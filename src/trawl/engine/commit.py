"""The commit: every finished attempt of a batch, fenced, with its effects, in one transaction.

Attempts without effects go through one set-based statement. An attempt with effects gets a
savepoint: its transition and effects apply together or, if an effect fails, not at all and
the attempt is recorded as failed instead. Stale attempts (lease lost) change nothing.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

from trawl.engine.apply import EffectApplier
from trawl.model import effects as fx
from trawl.model.errors import DataRejected
from trawl.model.records import AttemptResult, CommitReport, FailureInfo
from trawl.model.states import Journal, Outcome
from trawl.store import scheduling
from trawl.store.store import Store

log = logging.getLogger("trawl.commit")

_STATUS = {
    Outcome.SUCCESS: "done",
    Outcome.FAILURE: "failed",
    Outcome.RELEASED: "queued",
    Outcome.DEFERRED: "queued",  # due again at defer_until, as if released
    Outcome.SKIPPED: "skipped",
}
_MESSAGE = 2000  # characters of a failure's message in its journal entry (the table has all)
_KIND = {
    Outcome.SUCCESS: Journal.JOB_DONE,
    Outcome.FAILURE: Journal.JOB_FAILED,
    Outcome.RELEASED: Journal.JOB_RELEASED,
    Outcome.DEFERRED: Journal.JOB_DEFERRED,
    Outcome.SKIPPED: Journal.JOB_SKIPPED,
}


def prepare(results: Sequence[AttemptResult]) -> None:
    """Run the ``prepare()`` of the custom effects that have one (a crawl's fetch makes its
    WARC records durable): before the commit's transaction begins, outside any lock, and
    before attempts leave this process for a tracker. A prepare that raises fails the
    commit call, as an outage would: the attempts are committed later or their leases
    lapse."""
    for ready in _preparers(results):
        ready()


def needs_preparing(results: Sequence[AttemptResult]) -> bool:
    """Whether :func:`prepare` has anything to do for *results*."""
    return any(True for _ in _preparers(results))


def _preparers(results: Sequence[AttemptResult]) -> Iterator[Callable[[], None]]:
    for result in results:
        for effect in result.effects:
            if isinstance(effect, fx.Custom):
                ready = getattr(effect.effect, "prepare", None)
                if ready is not None:
                    yield ready


def commit(store: Store, results: Sequence[AttemptResult]) -> CommitReport:
    """Commit a batch of attempts; the report says which were stale."""
    report = CommitReport()
    with store.write():
        now = store.clock()
        plain = [r for r in results if not _has_effects(r)]
        held = store.apply_outcomes([_row(r, now) for r in plain], now)
        done = [r for r in plain if (r.job_id, r.attempt) in held]
        for run in _runs([r for r in results if _has_effects(r)]):
            done += _commit_run(store, run, now, report)
        # By attempt, not job: a batch may hold a lost attempt and the one that replaced it.
        committed = {(d.job_id, d.attempt) for d in done}
        stale = [r for r in results if (r.job_id, r.attempt) not in committed]
        _record(store, done, stale, now)
        _after(store, done, now)
    report.committed.extend(r.job_id for r in done)
    report.stale.extend(r.job_id for r in stale)
    return report


def _after(store: Store, done: Sequence[AttemptResult], now: float) -> None:
    """Consequences of the batch for other jobs: dependents wake, failing tasks stop."""
    succeeded = [(r.item_id, r.task, r.changed) for r in done if r.outcome is Outcome.SUCCESS]
    store.wake_dependents(succeeded, now)  # tells waiting workers itself
    failing = {r.task for r in done if r.outcome is Outcome.FAILURE and not r.apply_on_failure}
    if failing:
        for task in scheduling.stop_failing(store.items, failing, now):
            log.warning("task %s paused: too many unhandled failures", task)
    if any(r.outcome is Outcome.RELEASED for r in done):
        store.notify()


def commit_resilient(store: Store, results: Sequence[AttemptResult]) -> CommitReport:
    """:func:`commit`, but a value the database refuses costs only its own attempt: the
    batch is split in halves until the attempt that holds it is found, and that attempt is
    recorded as failed (with nothing applied) while the rest commit."""
    prepare(results)
    try:
        return commit(store, results)
    except DataRejected as error:
        if len(results) == 1:
            return _rejected(store, results[0], error)
        middle = len(results) // 2
        first = commit_resilient(store, results[:middle])
        return _merged(first, commit_resilient(store, results[middle:]))


def _rejected(store: Store, result: AttemptResult, error: DataRejected) -> CommitReport:
    log.error("job %s of %s could not be committed: %s", result.item_id, result.task, error)
    failed = msgspec.structs.replace(as_failure(result, error), retry_delay=None)
    try:
        report = commit(store, [failed])
    except DataRejected:  # not even its failure: its lease lapses and it is settled as lost
        log.exception(
            "job %s of %s: its failure could not be recorded", result.item_id, result.task
        )
        return CommitReport(stale=[result.job_id])
    report.effect_failures[result.job_id] = str(error)
    return report


def _merged(a: CommitReport, b: CommitReport) -> CommitReport:
    return CommitReport(
        committed=a.committed + b.committed,
        stale=a.stale + b.stale,
        effect_failures=a.effect_failures | b.effect_failures,
    )


def _has_effects(result: AttemptResult) -> bool:
    if not result.effects:
        return False
    if result.outcome in (Outcome.SUCCESS, Outcome.DEFERRED, Outcome.SKIPPED):
        return True
    return result.outcome is Outcome.FAILURE and result.apply_on_failure


def _runs(results: Sequence[AttemptResult]) -> Iterator[list[AttemptResult]]:
    """*results* in order, in runs: consecutive attempts of one task whose effects are all
    of one batched type (applied together), else one attempt a run."""
    run: list[AttemptResult] = []
    kind: tuple[str, type] | None = None
    for result in results:
        this = _batched_kind(result)
        if run and (this is None or this != kind):
            yield run
            run = []
        run.append(result)
        kind = this
        if this is None:
            yield run
            run = []
    if run:
        yield run


def _batched_kind(result: AttemptResult) -> tuple[str, type] | None:
    kinds = {type(e.effect) if isinstance(e, fx.Custom) else None for e in result.effects}
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    if kind is None or getattr(kind, "apply_many", None) is None:
        return None
    return result.task, kind


def _commit_run(
    store: Store, run: list[AttemptResult], now: float, report: CommitReport
) -> list[AttemptResult]:
    """Commit a run of attempts with effects: together under one savepoint where their
    effects' type applies many at once; if that fails, each under a savepoint of its own,
    so an effect that fails costs only its attempt."""
    if _batched_kind(run[0]) is not None:
        try:
            with store.savepoint():
                held = store.apply_outcomes([_row(r, now) for r in run], now)
                kept = [r for r in run if (r.job_id, r.attempt) in held]
                if kept:
                    effects = [
                        e.effect for r in kept for e in r.effects if isinstance(e, fx.Custom)
                    ]
                    batched: Any = type(effects[0])  # a BatchedEffect (see _batched_kind)
                    batched.apply_many(store, now, kept[0].task, effects)
                return kept
        except Exception as error:
            log.debug("a run of %d attempts' effects failed (%s): one by one", len(run), error)
    done = []
    for result in run:
        applied = _commit_with_effects(store, result, now, report)
        if applied is not None:
            done.append(applied)
    return done


def _commit_with_effects(
    store: Store, result: AttemptResult, now: float, report: CommitReport
) -> AttemptResult | None:
    try:
        with store.savepoint():
            if not store.apply_outcomes([_row(result, now)], now):
                return None
            EffectApplier(store, now=now, task=result.task).apply_all(result.effects)
            return result
    except Exception as error:
        # The effects were rolled back with the transition: record the attempt as failed.
        failed = as_failure(result, error)
        report.effect_failures[result.job_id] = failed.failure.message if failed.failure else ""
        return failed if store.apply_outcomes([_row(failed, now)], now) else None


def as_failure(result: AttemptResult, error: BaseException) -> AttemptResult:
    """The same attempt, recorded as failed by *error*, with nothing to apply."""
    info = FailureInfo(
        error_type=type(error).__name__,
        message=str(error) or type(error).__name__,
        traceback="".join(traceback.format_exception(error)),
    )
    return msgspec.structs.replace(
        result,
        outcome=Outcome.FAILURE,
        result=None,
        effects=(),
        failure=info,
        apply_on_failure=False,
    )


def _row(r: AttemptResult, now: float) -> tuple[Any, ...]:
    keep = r.outcome is Outcome.SUCCESS or (r.outcome is Outcome.FAILURE and r.apply_on_failure)
    retry_at = None if r.retry_delay is None else now + r.retry_delay
    if r.outcome is not Outcome.FAILURE:  # released: due now; deferred: at its own time
        retry_at = r.defer_until if r.outcome is Outcome.DEFERRED else None
    return (
        r.job_id,
        r.attempt,
        _STATUS[r.outcome],
        r.result if keep else None,
        keep,
        r.version,
        r.ttl,
        retry_at,
        r.result_hash,
        r.revisit_offset if r.outcome is Outcome.SUCCESS else None,
        r.not_found and r.outcome is Outcome.FAILURE,
    )


def _record(
    store: Store, done: Sequence[AttemptResult], stale: Sequence[AttemptResult], now: float
) -> None:
    journal = [_journal(r, _KIND[r.outcome], now) for r in done]
    journal += [_journal(r, Journal.JOB_STALE, now) for r in stale]
    store.journal_many(journal)
    store.record_failures(
        [
            {
                "job_id": r.job_id,
                "item_id": r.item_id,
                "task": r.task,
                "attempt": r.attempt,
                "error_type": _text(r.failure.error_type),
                "message": _text(r.failure.message),
                "traceback": _text(r.failure.traceback),
                "occurred_at": now,
                # allow_failure: recorded, but not counted against max_failures
                "allowed": r.apply_on_failure,
            }
            for r in done
            if r.outcome is Outcome.FAILURE and r.failure is not None
        ]
    )


def _text(value: str) -> str:
    """Exception texts are anybody's: keep what PostgreSQL's text can hold."""
    return value.replace("\x00", "\\x00") if "\x00" in value else value


def _journal(r: AttemptResult, kind: Journal, now: float) -> dict[str, Any]:
    detail = _detail(r, kind)
    return {"at": now, "kind": kind.value, "item_id": r.item_id, "task": r.task, "detail": detail}


def _detail(r: AttemptResult, kind: Journal) -> str:
    """What a consumer of the journal needs without a second read: a done job's version,
    whether its result changed, and the result (metadata) itself; a failure's error; when
    a deferred job is due again. Built as text: the result is already JSON."""
    fields: dict[str, Any] = {"attempt": int(r.attempt)}
    if kind is Journal.JOB_DONE:
        fields |= {"version": r.version, "changed": r.changed}
    elif kind is Journal.JOB_FAILED and r.failure is not None:
        fields |= {
            "error_type": _text(r.failure.error_type),
            "message": _text(r.failure.message)[:_MESSAGE],
            "retry": r.retry_delay is not None,
        }
    elif kind is Journal.JOB_DEFERRED and r.defer_until is not None:
        fields["until"] = r.defer_until
    text = msgspec.json.encode(fields).decode()
    if kind is Journal.JOB_DONE and r.result is not None:
        text = f'{text[:-1]},"result":{r.result}}}'
    return text
