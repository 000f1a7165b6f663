"""Shared key-value state: an async mapping, in memory (one process) or in Redis (a cluster).

Writes are awaited: when ``await kv.set(k, v)`` returns, every node reading the Redis map
sees *v*. Values are anything msgspec encodes as JSON and come back as plain data (a Struct
comes back as a dict); both backends store the encoded bytes, so a value read is never the
object that was written. Membership is ``await kv.contains(key)`` (Python's ``in`` cannot
wait for Redis); ``async for key in kv`` iterates the keys.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any, Protocol

import msgspec

from trawl.live.errors import KeyInvalid

MAX_KEY = 512
_BAD = re.compile(r"[\x00-\x1f\x7f]")

_encoder = msgspec.json.Encoder()


def check_key(key: object) -> str:
    if not isinstance(key, str):
        raise KeyInvalid(f"key {key!r}: keys are strings, not {type(key).__name__}")
    if not key or len(key) > MAX_KEY:
        raise KeyInvalid(f"key {key[:40]!r}: 1-{MAX_KEY} characters, got {len(key)}")
    if _BAD.search(key):
        raise KeyInvalid(f"key {key!r}: control characters are not allowed")
    return key


def _encode(key: str, value: Any) -> bytes:
    try:
        return _encoder.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        raise ValueError(f"value for key {key!r} cannot be stored: {error}") from None


class SharedMap(Protocol):
    async def get(self, key: str, default: Any = None) -> Any: ...

    async def set(self, key: str, value: Any) -> None: ...

    async def delete(self, key: str) -> bool: ...

    async def contains(self, key: str) -> bool: ...

    def __aiter__(self) -> AsyncIterator[str]: ...

    async def close(self) -> None: ...


class MemoryMap:
    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    async def get(self, key: str, default: Any = None) -> Any:
        raw = self._data.get(check_key(key))
        return default if raw is None else msgspec.json.decode(raw)

    async def set(self, key: str, value: Any) -> None:
        self._data[check_key(key)] = _encode(key, value)

    async def delete(self, key: str) -> bool:
        return self._data.pop(check_key(key), None) is not None

    async def contains(self, key: str) -> bool:
        return check_key(key) in self._data

    async def __aiter__(self) -> AsyncIterator[str]:
        for key in list(self._data):
            yield key

    async def close(self) -> None:
        pass


class RedisMap:
    """One Redis hash, ``trawl:live:<name>``, through redis-py's asyncio client."""

    def __init__(self, url: str, name: str = "shared") -> None:
        from redis import asyncio as aioredis

        self.url = url
        self.key = f"trawl:live:{check_key(name)}"
        self._redis = aioredis.from_url(url)

    async def get(self, key: str, default: Any = None) -> Any:
        raw = await self._redis.hget(self.key, check_key(key))
        return default if raw is None else msgspec.json.decode(raw)

    async def set(self, key: str, value: Any) -> None:
        await self._redis.hset(self.key, check_key(key), _encode(key, value))

    async def delete(self, key: str) -> bool:
        return bool(await self._redis.hdel(self.key, check_key(key)))

    async def contains(self, key: str) -> bool:
        return bool(await self._redis.hexists(self.key, check_key(key)))

    async def __aiter__(self) -> AsyncIterator[str]:
        async for key, _ in self._redis.hscan_iter(self.key):
            yield key.decode() if isinstance(key, bytes) else key

    async def clear(self) -> None:
        await self._redis.delete(self.key)

    async def close(self) -> None:
        await self._redis.aclose()
