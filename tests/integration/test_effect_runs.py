"""Consecutive attempts whose effects are all of one batched type (a commit's crawl fetches)
are applied together, with the same outcome as one by one: a failing effect still costs
only its own attempt, a stale attempt applies nothing, and other effects keep their order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import msgspec

from tests.integration.helpers import claim, item, success, task
from trawl.engine.commit import commit
from trawl.model import effects as fx
from trawl.model.records import ClaimedJob, NewItem
from trawl.store.store import Store


@dataclass(frozen=True, slots=True)
class Mark:
    """Creates the item ``mark:<n>``; a negative *n* fails."""

    n: int
    runs: ClassVar[list[int]] = []  # the size of each apply_many call

    def apply(self, store: Store, now: float, task: str) -> None:
        Mark.apply_many(store, now, task, [self])

    @classmethod
    def apply_many(cls, store: Store, now: float, task: str, effects: Sequence[Mark]) -> None:
        cls.runs.append(len(effects))
        if any(e.n < 0 for e in effects):
            raise ValueError("a negative mark")
        store.add_items([NewItem(id=f"mark:{e.n}") for e in effects])


def _jobs(store: Store, count: int) -> list[ClaimedJob]:
    store.register_tasks([task()])
    store.add_items([item(f"sku:{n}", "product") for n in range(count)])
    Mark.runs.clear()
    return sorted(claim(store, limit=count), key=lambda j: j.item_id)


def _marked(job: ClaimedJob, *effects: fx.Effect) -> object:
    return success(job, {"ok": True}, effects=effects)


def _exists(store: Store, n: int) -> bool:
    return store.get_item(f"mark:{n}") is not None


def test_a_run_of_batched_effects_is_applied_in_one_call(store: Store) -> None:
    jobs = _jobs(store, 3)
    results = [_marked(j, fx.Custom(effect=Mark(n))) for n, j in enumerate(jobs)]
    report = commit(store, results)  # type: ignore[arg-type]
    assert sorted(report.committed) == sorted(j.job_id for j in jobs)
    assert Mark.runs == [3]
    assert all(_exists(store, n) for n in range(3))


def test_a_failing_effect_in_a_run_costs_only_its_own_attempt(store: Store) -> None:
    jobs = _jobs(store, 3)
    marks = [Mark(0), Mark(-1), Mark(2)]
    results = [_marked(j, fx.Custom(effect=m)) for j, m in zip(jobs, marks, strict=True)]
    report = commit(store, results)  # type: ignore[arg-type]
    assert Mark.runs == [3, 1, 1, 1], "the run failed, then each attempt alone"
    assert "a negative mark" in report.effect_failures[jobs[1].job_id]
    assert [_exists(store, 0), _exists(store, 2)] == [True, True]
    states = [store.get_item(j.item_id).jobs[0].status for j in jobs]  # type: ignore[union-attr]
    assert states == ["done", "failed", "done"]


def test_a_stale_attempt_in_a_run_applies_nothing(store: Store) -> None:
    jobs = _jobs(store, 3)
    lost = msgspec.structs.replace(jobs[1], attempt=jobs[1].attempt + 1)  # not the lease's
    results = [
        _marked(j, fx.Custom(effect=Mark(n))) for n, j in enumerate([jobs[0], lost, jobs[2]])
    ]
    report = commit(store, results)  # type: ignore[arg-type]
    assert report.stale == [jobs[1].job_id]
    assert Mark.runs == [2]
    assert [_exists(store, n) for n in range(3)] == [True, False, True]


def test_other_effects_split_runs_and_keep_their_order(store: Store) -> None:
    jobs = _jobs(store, 4)
    log = fx.Log(id=jobs[2].item_id, task="price", category="note", message="between")
    results = [
        _marked(jobs[0], fx.Custom(effect=Mark(0))),
        _marked(jobs[1], fx.Custom(effect=Mark(1))),
        _marked(jobs[2], log),
        _marked(jobs[3], fx.Custom(effect=Mark(3)), fx.Custom(effect=Mark(4))),
    ]
    report = commit(store, results)  # type: ignore[arg-type]
    assert len(report.committed) == 4
    assert Mark.runs == [2, 2], "the log's attempt ends the first run; the last is its own"
    assert all(_exists(store, n) for n in (0, 1, 3, 4))
