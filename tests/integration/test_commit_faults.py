"""A commit batch survives its worst attempt: texts the database cannot hold, values it
refuses, and overlapping inserts from two PostgreSQL writers."""

from __future__ import annotations

import threading

import msgspec
import psycopg
import pytest
from sqlalchemy import exc as sa_exc

from tests.integration.helpers import claim, failure, item, success, task
from trawl.engine.commit import commit, commit_resilient
from trawl.model.errors import DatabaseUnavailable, DataRejected, TransientConflict
from trawl.model.records import NewItem
from trawl.store.connection import translate
from trawl.store.store import Store


def _claimed(store: Store, count: int) -> list:  # type: ignore[type-arg]
    store.register_tasks([task()])
    store.add_items([item(f"sku:{n}", "product") for n in range(count)])
    return claim(store, limit=count)


def test_a_nul_in_an_error_text_is_recorded_not_fatal(store: Store) -> None:
    (job,) = _claimed(store, 1)
    report = commit(store, [failure(job, "bad byte \x00 here")])
    assert report.committed == [job.job_id]
    (recorded,) = store.failures(task="price")
    assert recorded.message == "bad byte \\x00 here"


@pytest.mark.postgres
def test_a_value_the_database_refuses_fails_only_its_own_attempt(pg_url: str) -> None:
    with Store(pg_url) as store:
        jobs = _claimed(store, 5)
        results = [success(j, {"n": n}) for n, j in enumerate(jobs)]
        # A raw NUL in the result text (as a remote executor might send): PostgreSQL refuses.
        results[3] = msgspec.structs.replace(results[3], result='{"x": "\x00"}')
        with pytest.raises(DataRejected, match="refused a value"):
            commit(store, results)
        report = commit_resilient(store, results)
        assert sorted(report.committed) == sorted(j.job_id for j in jobs)
        assert "refused a value" in report.effect_failures[jobs[3].job_id]
        states = {j.item_id: store.get_item(j.item_id).jobs[0] for j in jobs}  # type: ignore[union-attr]
        assert [states[j.item_id].status for j in jobs] == ["done"] * 3 + ["failed", "done"]
        assert states[jobs[3].item_id].due_at is None  # the same value would fail again
        (recorded,) = store.failures(task="price")
        assert (recorded.item_id, recorded.error_type) == (jobs[3].item_id, "DataRejected")


@pytest.mark.postgres
def test_overlapping_inserts_in_opposite_orders_do_not_deadlock(pg_url: str) -> None:
    ids = [f"url:https://a.example/{n:05d}" for n in range(20_000)]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def add(order: list[str]) -> None:
        with Store(pg_url) as store:
            try:
                store.status()  # connected before the race starts
                start.wait()
                store.add_items([NewItem(id=i, tags=(("page", None),)) for i in order])
            except BaseException as error:
                errors.append(error)

    threads = [threading.Thread(target=add, args=(o,)) for o in (ids, ids[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    with Store(pg_url) as store:
        assert all(store.get_item(i) is not None for i in ids[:: len(ids) // 50])


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (psycopg.errors.DeadlockDetected("deadlock detected"), TransientConflict),
        (psycopg.errors.SerializationFailure("could not serialize"), TransientConflict),
        (
            psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"),
            TransientConflict,
        ),
        (psycopg.errors.StringDataRightTruncation("value too long"), DataRejected),
        (psycopg.errors.UniqueViolation("duplicate key"), DataRejected),
    ],
)
def test_driver_errors_become_transient_or_rejected(error: Exception, kind: type) -> None:
    wrapped = sa_exc.DBAPIError.instance("UPDATE jobs ...", {}, error, psycopg.Error)
    translated = translate("postgresql://u:secret@h/db", wrapped)
    assert isinstance(translated, kind)
    assert "secret" not in str(translated)
    # Transient conflicts are retried by the worker like an outage, never the task's failure.
    assert isinstance(translated, DatabaseUnavailable) is (kind is TransientConflict)
