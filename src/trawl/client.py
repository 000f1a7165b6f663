"""A Python client for trawl's HTTP API (docs/api.md): ``Client`` (blocking) and
``AsyncClient``, with the same methods. Listings are iterators that fetch page after page;
errors are :class:`ApiError` carrying the server's problem details."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from trawl.model.errors import TrawlError

BATCH = 10_000  # items per POST /items, the server's limit
DEFAULT_TIMEOUT = 30.0

Json = Any


class ApiError(TrawlError):
    """The server answered with an error; *problem* is its RFC 9457 body."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        self.status = status
        self.problem = dict(problem)
        title = problem.get("title") or "error"
        detail = problem.get("detail") or ""
        super().__init__(f"{status} {title}: {detail}" if detail else f"{status} {title}")


def _item_path(item_id: str) -> str:
    return "/items/" + quote(item_id, safe="")


def _raise_for(response: httpx.Response) -> Json:
    if response.status_code == 204:
        return None
    if response.is_success:
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text
    try:
        problem = response.json()
    except ValueError:
        problem = {"title": response.reason_phrase, "detail": response.text[:500]}
    raise ApiError(response.status_code, problem if isinstance(problem, dict) else {})


def _batches(items: Iterable[Mapping[str, Any]]) -> Iterator[list[Mapping[str, Any]]]:
    batch: list[Mapping[str, Any]] = []
    for item in items:
        batch.append(item)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _query(**params: Any) -> dict[str, Any]:
    return {
        k: (str(v).lower() if isinstance(v, bool) else v)
        for k, v in params.items()
        if v is not None
    }


class _Calls:
    """What both clients send; ``_call`` returns the value (Client) or a coroutine of it."""

    _call: Callable[..., Any]

    def health(self) -> Any:
        return self._call("GET", "/health")

    def item(self, item_id: str) -> Any:
        """The item (through any of its ids or aliases): data, tags, aliases, jobs."""
        return self._call("GET", _item_path(item_id))

    def patch_data(self, item_id: str, patch: Mapping[str, Any]) -> Any:
        """RFC 7396 merge patch of the item's data (``None`` removes a key)."""
        return self._call("PATCH", _item_path(item_id), json=dict(patch))

    def delete_item(self, item_id: str) -> Any:
        return self._call("DELETE", _item_path(item_id))

    def edit(self, edits: Iterable[Mapping[str, Any]]) -> Any:
        """Apply edits (``{"op": "rename", "id": ..., "to": ...}`` ...) all or none."""
        return self._call("POST", "/edits", json={"edits": list(edits)})

    def tasks(self) -> Any:
        """``{"tasks": [...]}``: each task's version and job counts."""
        return self._call("GET", "/tasks")

    def pause(self, task: str, reason: str | None = None) -> Any:
        return self._call("POST", f"/tasks/{quote(task, safe='')}/pause", json={"reason": reason})

    def resume(self, task: str) -> Any:
        return self._call("POST", f"/tasks/{quote(task, safe='')}/resume")

    def expire(self, task: str, *, tag: str | None = None, item: str | None = None) -> Any:
        return self._call(
            "POST", f"/tasks/{quote(task, safe='')}/expire", json=_query(tag=tag, item=item)
        )

    def retry_failures(
        self, *, ids: list[int] | None = None, task: str | None = None, item: str | None = None
    ) -> Any:
        return self._call("POST", "/failures/retry", json=_query(ids=ids, task=task, item=item))

    def handle_failures(
        self, *, ids: list[int] | None = None, task: str | None = None, item: str | None = None
    ) -> Any:
        return self._call("POST", "/failures/handle", json=_query(ids=ids, task=task, item=item))

    def limits(self) -> Any:
        return self._call("GET", "/limits")

    def ack(self, consumer: str, seq: int) -> Any:
        return self._call("POST", f"/consumers/{quote(consumer, safe='')}/ack", json={"seq": seq})

    def consumers(self) -> Any:
        return self._call("GET", "/consumers")

    def crawl(self, crawl_id: int) -> Any:
        return self._call("GET", f"/crawls/{int(crawl_id)}")

    def create_crawl(self, seeds: list[str], **options: Any) -> Any:
        return self._call("POST", "/crawls", json={"seeds": seeds, **options})

    def abort_crawl(self, crawl_id: int) -> Any:
        return self._call("POST", f"/crawls/{int(crawl_id)}/abort")

    def resume_crawl(self, crawl_id: int) -> Any:
        return self._call("POST", f"/crawls/{int(crawl_id)}/resume")


# (path, params, the key of the rows, the key of the next cursor) of each listing
def _listing(name: str, **params: Any) -> tuple[str, dict[str, Any], str]:
    paths = {
        "tagged": ("/items", "items"),
        "due": ("/due", "jobs"),
        "failures": ("/failures", "failures"),
        "pages": ("/crawls/{crawl}/pages", "pages"),
        "hosts": ("/hosts", "hosts"),
    }
    path, rows = paths[name]
    crawl = params.pop("crawl", None)
    return path.format(crawl=crawl), _query(**params), rows


class Client(_Calls):
    """Blocking client: ``Client("http://127.0.0.1:8765", token=T)``; use it as a context
    manager or call :meth:`close`."""

    def __init__(
        self, url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT, transport: Any = None
    ) -> None:
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return _raise_for(self._http.request(method, path, **kwargs))

    def add_items(self, items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """Add items (``{"id", "tags", "data"}``), 10,000 a request; returns the ids created
        and how many already existed."""
        created: list[str] = []
        existing = 0
        for batch in _batches(items):
            answer = self._call("POST", "/items", json={"items": batch})
            created += answer["created"]
            existing += answer["existing"]
        return {"created": created, "existing": existing}

    def _pages(self, name: str, **params: Any) -> Iterator[Any]:
        path, query, rows = _listing(name, **params)
        while True:
            page = self._call("GET", path, params=query)
            yield from page[rows]
            if not page.get("next"):
                return
            query["cursor"] = page["next"]

    def tagged(self, tag: str) -> Iterator[str]:
        return self._pages("tagged", tag=tag, limit=1000)

    def due(self, *, task: str | None = None, tag: str | None = None) -> Iterator[Any]:
        return self._pages("due", task=task, tag=tag, limit=1000)

    def failures(
        self, *, task: str | None = None, item: str | None = None, handled: bool = False
    ) -> Iterator[Any]:
        return self._pages("failures", task=task, item=item, handled=handled, limit=1000)

    def crawl_pages(self, crawl_id: int, *, status: str | None = None) -> Iterator[Any]:
        return self._pages("pages", crawl=int(crawl_id), status=status, limit=1000)

    def hosts(self) -> Iterator[Any]:
        return self._pages("hosts", limit=1000)

    def journal(
        self, *, after: int = 0, consumer: str | None = None, start: str = "beginning"
    ) -> Iterator[Any]:
        """Journal entries to the current end. With *consumer*, from that consumer's stored
        position, acknowledging each page once the loop has moved past its last entry: a
        consumer that stops (or crashes) resumes after what it finished, so an entry is
        seen at least once."""
        if consumer is None:
            while True:
                page = self._call("GET", "/journal", params={"after": after, "limit": 1000})
                yield from page["entries"]
                if not page["entries"]:
                    return
                after = page["next_after"]
        name = quote(consumer, safe="")
        while True:
            query = {"limit": 1000, "start": start}
            page = self._call("GET", f"/consumers/{name}/entries", params=query)
            if not page["entries"]:
                return
            yield from page["entries"]
            self.ack(consumer, page["next_after"])


class AsyncClient(_Calls):
    """The same API for asyncio: ``async with AsyncClient(url, token=T) as client``."""

    def __init__(
        self, url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT, transport: Any = None
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return _raise_for(await self._http.request(method, path, **kwargs))

    async def add_items(self, items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        created: list[str] = []
        existing = 0
        for batch in _batches(items):
            answer = await self._call("POST", "/items", json={"items": batch})
            created += answer["created"]
            existing += answer["existing"]
        return {"created": created, "existing": existing}

    async def _pages(self, name: str, **params: Any) -> AsyncIterator[Any]:
        path, query, rows = _listing(name, **params)
        while True:
            page = await self._call("GET", path, params=query)
            for row in page[rows]:
                yield row
            if not page.get("next"):
                return
            query["cursor"] = page["next"]

    def tagged(self, tag: str) -> AsyncIterator[str]:
        return self._pages("tagged", tag=tag, limit=1000)

    def due(self, *, task: str | None = None, tag: str | None = None) -> AsyncIterator[Any]:
        return self._pages("due", task=task, tag=tag, limit=1000)

    def failures(
        self, *, task: str | None = None, item: str | None = None, handled: bool = False
    ) -> AsyncIterator[Any]:
        return self._pages("failures", task=task, item=item, handled=handled, limit=1000)

    def crawl_pages(self, crawl_id: int, *, status: str | None = None) -> AsyncIterator[Any]:
        return self._pages("pages", crawl=int(crawl_id), status=status, limit=1000)

    def hosts(self) -> AsyncIterator[Any]:
        return self._pages("hosts", limit=1000)

    async def journal(
        self, *, after: int = 0, consumer: str | None = None, start: str = "beginning"
    ) -> AsyncIterator[Any]:
        """As :meth:`Client.journal`."""
        if consumer is None:
            while True:
                page = await self._call("GET", "/journal", params={"after": after, "limit": 1000})
                for entry in page["entries"]:
                    yield entry
                if not page["entries"]:
                    return
                after = page["next_after"]
        name = quote(consumer, safe="")
        while True:
            query = {"limit": 1000, "start": start}
            page = await self._call("GET", f"/consumers/{name}/entries", params=query)
            if not page["entries"]:
                return
            for entry in page["entries"]:
                yield entry
            await self.ack(consumer, page["next_after"])
