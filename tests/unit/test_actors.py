"""Actor types: the default spawn policy, the caps, and checked declarations."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import trawl
from trawl.runtime.actor.spec import ActorInfo, ActorType, QueueInfo, actors_to_spawn
from trawl.runtime.orchestrator import _round_robin


def _type(max_actors: int = 4, concurrency: int = 1, **spec: object) -> ActorType:
    return ActorType(
        name="work",
        timeout=60.0,
        niceness=0,
        spec=trawl.Actor(max_actors=max_actors, **spec),  # type: ignore[arg-type]
        concurrency=concurrency,
    )


def _queue(**keys: int) -> QueueInfo:
    counts: dict[str | None, int] = {None: keys.pop("none")} if "none" in keys else {}
    counts.update(keys)
    depth = sum(counts.values())
    return QueueInfo(depth=depth, capped=False, keys=counts)


def _running(*keys: str | None) -> list[ActorInfo]:
    return [
        ActorInfo(type="work", key=key, pid=n, owner=f"o{n}", tasks=("work",))
        for n, key in enumerate(keys)
    ]


@pytest.mark.parametrize(
    ("due", "wanted"),
    [(0, 0), (1, 1), (5, 1), (6, 2), (10, 2), (11, 4), (10_000, 4)],
)
def test_the_default_policy_follows_the_spec_example(due: int, wanted: int) -> None:
    # One actor for a small queue, two for more than 5 objects, all it may for more than 10.
    assert actors_to_spawn(_queue(none=due), [], _type()) == [None] * wanted


def test_the_policy_counts_rounds_of_an_actors_slots() -> None:
    actor_type = _type(concurrency=16)
    assert len(actors_to_spawn(_queue(none=16 * 5), [], actor_type)) == 1
    assert len(actors_to_spawn(_queue(none=16 * 5 + 1), [], actor_type)) == 2
    assert len(actors_to_spawn(_queue(none=16 * 10 + 1), [], actor_type)) == 4


def test_running_actors_count_towards_the_target() -> None:
    assert actors_to_spawn(_queue(none=100), _running(None, None, None), _type()) == [None]
    assert actors_to_spawn(_queue(none=3), _running(None), _type()) == []


def test_keys_get_their_own_actors_and_the_type_cap_holds() -> None:
    queue = _queue(alice=50, bob=3)
    assert sorted(actors_to_spawn(queue, [], _type()), key=str) == ["alice"] * 4 + ["bob"]
    # Clipped to max_actors, one key in turn: bob is not starved by alice's backlog.
    assert _type(max_actors=2).to_spawn(queue, []) == ["alice", "bob"]
    assert _type(max_actors=3).to_spawn(queue, _running("alice", "bob", "alice")) == []


def test_a_custom_policy_is_clipped_and_a_failing_one_spawns_nothing() -> None:
    def greedy(queue: QueueInfo, running: Sequence[ActorInfo], t: ActorType) -> list[str | None]:
        return [None] * 100

    def broken(queue: QueueInfo, running: Sequence[ActorInfo], t: ActorType) -> list[str | None]:
        raise RuntimeError("policy bug")

    assert _type(max_actors=3, spawn=greedy).to_spawn(_queue(none=1), _running(None)) == [
        None,
        None,
    ]
    assert _type(spawn=broken).to_spawn(_queue(none=100), []) == []


def test_the_global_cap_is_shared_one_type_in_turn() -> None:
    wanted: dict[str, list[str | None]] = {"a": [None] * 4, "b": [None] * 4, "c": [None]}
    picked = list(_round_robin(["a", "b", "c"], wanted, 4))
    assert [name for name, _ in picked] == ["a", "b", "c", "a"]
    assert list(_round_robin(["a", "b"], {"a": [None], "b": []}, 5)) == [("a", None)]


@pytest.mark.parametrize(
    "options",
    [
        {"max_actors": 0},
        {"concurrency": 0},
        {"key": "persona"},
        {"on_startup": 3},
        {"linger": -1},
    ],
)
def test_bad_actor_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(trawl.InvalidInput):
        trawl.Actor(**options)  # type: ignore[arg-type]


def test_a_task_takes_only_an_actor() -> None:
    app = trawl.App()
    with pytest.raises(trawl.InvalidInput, match=r"actor must be trawl\.Actor"):
        app.task(tags=["t"], actor={"max_actors": 2})(lambda ctx: None)
    app.task(name="ok", tags=["t"])(lambda ctx: None)
    assert app.tasks["ok"].actor == trawl.Actor()


def test_current_actor_is_none_outside_an_actor() -> None:
    assert trawl.current_actor() is None
