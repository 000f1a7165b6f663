"""What a fetch attempt commits with its job, atomically: the attempt's record, a host
block, the payload digest, and the links it found."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trawl.crawl.frontier import Discover, discover_many
from trawl.store.store import Store


@dataclass(frozen=True, kw_only=True, slots=True)
class Fetched:
    """A custom effect: one attempt's outcome."""

    item_id: str
    attempt: int
    record: dict[str, Any]  # a crawl_attempts row
    block: tuple[str, float] | None = None  # (host, until) after 429/503
    payload: tuple[int, str, str, str] | None = None  # (crawl, digest, url, date): first copy
    discover: Discover | None = None
    host_ok: str | None = None  # a host that had errors answered: its backoff is over
    # First copies of the payloads a browser page's sub-requests archived: (crawl, digest,
    # url, date) like *payload*.
    subpayloads: tuple[tuple[int, str, str, str], ...] = ()
    # Makes the attempt's WARC records durable (local fetches; a remote pipeline syncs
    # before it sends): run before the commit that records their offsets.
    sync: Callable[[], None] | None = field(default=None, compare=False)

    def prepare(self) -> None:
        if self.sync is not None:
            self.sync()

    def wire(self) -> tuple[str, Any]:
        """As a remote pipeline sends it (crawl/remote.py decodes and checks it)."""
        body: dict[str, Any] = {
            "item_id": self.item_id,
            "attempt": self.attempt,
            "record": self.record,
            "block": self.block,
            "payload": self.payload,
            "host_ok": self.host_ok,
        }
        if self.subpayloads:
            body["subpayloads"] = [list(p) for p in self.subpayloads]
        if self.discover is not None:
            found = [dataclasses.asdict(f) for f in self.discover.found]
            body["discover"] = {
                "crawl_id": self.discover.crawl_id,
                "parent": self.discover.parent,
                "found": found,
            }
        return "crawl.fetched", body

    def apply(self, store: Store, now: float, task: str) -> None:
        Fetched.apply_many(store, now, task, [self])

    @classmethod
    def apply_many(cls, store: Store, now: float, task: str, effects: Sequence[Fetched]) -> None:
        """Several attempts' outcomes (a commit's fetches) in a few statements."""
        tables = store.crawls
        tables.add_attempts([e.record for e in effects])
        # The attempt's slots are not freed here: the fetcher's next plan frees them (its
        # `finished`), and a slot stops counting once its attempt is no longer running.
        # Deleting them here too made the commit and the politeness gate wait for each
        # other's row locks on PostgreSQL.
        for host in dict.fromkeys(e.host_ok for e in effects if e.host_ok is not None):
            tables.host_ok(host)
        for e in effects:
            if e.block is not None:
                tables.block(*e.block)
        tables.add_payloads([p for e in effects for p in _payloads(e)])
        by_crawl: dict[int, list[Discover]] = {}
        for e in effects:
            if e.discover is not None:
                by_crawl.setdefault(e.discover.crawl_id, []).append(e.discover)
        for crawl_id, finds in by_crawl.items():
            crawl = next((d.crawl for d in finds if d.crawl is not None), None)
            pairs = [(d.parent, d.found) for d in finds]
            discover_many(tables, crawl_id, pairs, now, crawl=crawl)


def _payloads(e: Fetched) -> list[tuple[int, str, str, str]]:
    return ([e.payload] if e.payload is not None else []) + list(e.subpayloads)


@dataclass(frozen=True, kw_only=True, slots=True)
class Skipped:
    """A custom effect: the page is skipped (by a rule, robots.txt or depth) and why."""

    crawl_id: int
    url: str
    reason: str
    record: dict[str, Any]

    def wire(self) -> tuple[str, Any]:
        body = {"crawl_id": self.crawl_id, "url": self.url, "reason": self.reason}
        return "crawl.skipped", body | {"record": self.record}

    def apply(self, store: Store, now: float, task: str) -> None:
        tables = store.crawls
        tables.set_skip(self.crawl_id, self.url, self.reason)
        tables.add_attempt(self.record)


@dataclass(frozen=True, kw_only=True, slots=True)
class Parked:
    """A custom effect: the crawl was aborted; the page waits until it is resumed."""

    item_id: str

    def wire(self) -> tuple[str, Any]:
        return "crawl.parked", {"item_id": self.item_id}

    def apply(self, store: Store, now: float, task: str) -> None:
        store.crawls.park_job(self.item_id)
