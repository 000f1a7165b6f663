"""Shared state: the in-memory and Redis maps behave alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import msgspec
import pytest

from tests.live.helpers import run
from tests.live.services import REDIS, need
from trawl.live import KeyInvalid, MemoryMap, RedisMap, SharedMap


class Point(msgspec.Struct):
    x: int
    y: int


@pytest.fixture(params=["memory", "redis"])
def make_map(request: pytest.FixtureRequest) -> Iterator[type]:
    if request.param == "memory":
        yield lambda: MemoryMap()
    else:
        url = need(REDIS, 6379, "Redis")
        name = f"test-{uuid.uuid4().hex[:8]}"
        yield lambda: RedisMap(url, name)


def test_writes_are_awaited_reads_are_copies_and_keys_iterate(make_map) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        kv: SharedMap = make_map()
        try:
            value = {"a": [1, 2]}
            await kv.set("k1", value)
            value["a"].append(3)
            assert await kv.get("k1") == {"a": [1, 2]}, "the stored value is not the object"
            await kv.set("k2", Point(1, 2))
            assert await kv.get("k2") == {"x": 1, "y": 2}
            assert await kv.contains("k1")
            assert not await kv.contains("nope")
            assert await kv.get("nope", "default") == "default"
            assert sorted([k async for k in kv]) == ["k1", "k2"]
            assert await kv.delete("k1") is True
            assert await kv.delete("k1") is False
            assert [k async for k in kv] == ["k2"]
        finally:
            if isinstance(kv, RedisMap):
                await kv.clear()
            await kv.close()

    run(main)


def test_bad_keys_and_values_are_refused_naming_them(make_map) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        kv: SharedMap = make_map()
        try:
            for key, match in [
                ("", "1-512"),
                ("x" * 513, "got 513"),
                ("a\nb", "control"),
                (5, "strings"),
            ]:
                with pytest.raises(KeyInvalid, match=match):
                    await kv.set(key, 1)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="value for key 'k' cannot be stored"):
                await kv.set("k", object())
            assert not await kv.contains("k")
        finally:
            await kv.close()

    run(main)


def test_two_redis_maps_of_one_name_share_state() -> None:
    url = need(REDIS, 6379, "Redis")
    name = f"test-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        one, two = RedisMap(url, name), RedisMap(url, name)
        try:
            await one.set("shared", 42)
            assert await two.get("shared") == 42
        finally:
            await one.clear()
            await one.close()
            await two.close()

    run(main)
