"""Crawls as operators handle them: create, find again, abort, resume, tune, edit rules,
and the counts progress and ``crawl show`` report."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from trawl.crawl import urls
from trawl.crawl.frontier import Found, discover
from trawl.crawl.options import Options
from trawl.crawl.rules import Rule, host_rule, make_rule
from trawl.model.errors import InvalidInput, TrawlError
from trawl.model.records import TaskInfo
from trawl.model.states import Journal
from trawl.store import codec
from trawl.store.crawls import FETCH_TASK, CrawlRow
from trawl.store.store import Store

ACTIVE, DRAINING, FINISHED, ABORTED = "ACTIVE", "DRAINING", "FINISHED", "ABORTED"


class CrawlNotFound(TrawlError, LookupError):
    """No crawl has this id."""


class RulesetConflict(TrawlError):
    """The ruleset moved on since the version the edit was based on."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CrawlSpec:
    """What ``trawl crawl URL...`` asks for."""

    seeds: tuple[str, ...]
    depth: int | None = None
    accept: tuple[str, ...] = ()
    reject: tuple[str, ...] = ()
    user_agent: str | None = None
    niceness: int = 0
    concurrency: int = 8
    tag: str | None = None
    note: str | None = None
    created_by: str | None = None
    options: Options = field(default_factory=Options)

    def digest(self) -> str:
        """Equal for the same command, so running it again finds (and resumes) the crawl."""
        key = {
            "seeds": list(self.seeds),
            "depth": self.depth,
            "accept": list(self.accept),
            "reject": list(self.reject),
            "warc": self.options.warc,
        }
        return hashlib.blake2b(codec.dumps(key).encode(), digest_size=10).hexdigest()

    def rules(self) -> list[Rule]:
        accept = [make_rule("accept", p) for p in self.accept] or _host_rules(self.seeds)
        rules = accept + [make_rule("skip", p) for p in self.reject]
        if self.user_agent:
            rules.append(make_rule("user_agent", "", self.user_agent))
        return rules


@dataclass(frozen=True, kw_only=True, slots=True)
class Progress:
    """A crawl's state as the live display and ``crawl show`` present it."""

    crawl: CrawlRow
    status: str
    ready: int = 0
    claimed: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    parked: int = 0
    bytes: int = 0
    responses: int = 0
    frontier: int | None = None
    busy: tuple[tuple[str, int], ...] = ()
    at: float = 0.0

    @property
    def total(self) -> int:
        return self.ready + self.claimed + self.done + self.failed + self.skipped + self.parked


def canonical_seeds(seeds: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for seed in seeds:
        url = urls.canonical(seed)
        if url is None:
            raise InvalidInput(f"seed {seed!r} is not an http(s) URL trawl can fetch")
        out.append(url)
    return tuple(dict.fromkeys(out))


def register(store: Store, info: TaskInfo) -> None:
    """Make sure the fetch task is known before pages are created (their jobs need it)."""
    store.register_tasks([info])


def create(store: Store, spec: CrawlSpec) -> int:
    """A new crawl with its first ruleset and its seeds (depth 0); returns its id."""
    rules = [r.to_json() for r in spec.rules()]
    tables = store.crawls
    with store.write():
        now = store.clock()
        crawl_id = tables.create(
            {
                "spec": spec.digest(),
                "seeds": list(spec.seeds),
                "depth_limit": spec.depth,
                "niceness": spec.niceness,
                "concurrency": spec.concurrency,
                "tag": spec.tag,
                "created_by": spec.created_by,
                "note": spec.note,
                "options": spec.options.to_json(),
            },
            now,
        )
        tables.add_ruleset(crawl_id, 1, rules, now, "created")
        tables.update(crawl_id, "ruleset", 1)
        discover(tables, crawl_id, None, [Found(url=s, hops=0) for s in spec.seeds], now)
        _journal(store, Journal.CRAWL_CREATED, crawl_id, seeds=len(spec.seeds), depth=spec.depth)
        store.notify()
    return crawl_id


def _journal(store: Store, kind: Journal, crawl_id: int, **detail: Any) -> None:
    """Crawl operations are journaled like item changes, so a consumer sees who steered
    a crawl and how (inside the caller's write)."""
    store.items.journal(kind, store.clock(), None, FETCH_TASK, {"crawl": crawl_id, **detail})


def find(store: Store, spec: CrawlSpec) -> CrawlRow | None:
    return store.crawls.by_spec(spec.digest())


def get(store: Store, crawl_id: int) -> CrawlRow:
    row = store.crawls.get(crawl_id)
    if row is None:
        raise CrawlNotFound(f"no crawl has the id {crawl_id}: `trawl crawl list` shows them")
    return row


def all_crawls(store: Store) -> list[CrawlRow]:
    return store.crawls.all()


def abort(store: Store, crawl_id: int) -> int:
    """Stop claiming the crawl's pages (running ones finish); returns how many were parked."""
    tables = store.crawls
    with store.write():
        get(store, crawl_id)
        tables.update(crawl_id, "aborted", True)
        parked = tables.park_jobs(crawl_id)
        _journal(store, Journal.CRAWL_ABORTED, crawl_id, parked=parked)
        return parked


def resume(store: Store, crawl_id: int) -> int:
    """Undo an abort; returns how many pages became due again."""
    tables = store.crawls
    with store.write():
        get(store, crawl_id)
        tables.update(crawl_id, "aborted", False)
        count = tables.unpark_jobs(crawl_id, store.clock())
        _journal(store, Journal.CRAWL_RESUMED, crawl_id, due=count)
        store.notify()
        return count


def set_concurrency(store: Store, crawl_id: int, value: int) -> None:
    if value < 0:
        raise InvalidInput(f"concurrency must be 0 or more, got {value}")
    with store.write():
        before = get(store, crawl_id).concurrency
        store.crawls.update(crawl_id, "concurrency", value)
        _journal(store, Journal.CRAWL_CONCURRENCY, crawl_id, before=before, after=value)


def set_niceness(store: Store, crawl_id: int, value: int) -> int:
    tables = store.crawls
    with store.write():
        before = get(store, crawl_id).niceness
        tables.update(crawl_id, "niceness", value)
        changed = tables.set_niceness(crawl_id, value)
        _journal(store, Journal.CRAWL_NICENESS, crawl_id, before=before, after=value)
        return changed


def rules(store: Store, crawl_id: int) -> tuple[int, list[dict[str, Any]]]:
    """(current version, its rules)."""
    crawl = get(store, crawl_id)
    return crawl.ruleset, store.crawls.ruleset(crawl_id, crawl.ruleset)


def edit_rules(
    store: Store,
    crawl_id: int,
    *,
    add: list[Rule] | None = None,
    remove: list[int] | None = None,
    ensure: int | None = None,
    note: str | None = None,
) -> int:
    """Store a new ruleset version (the current rules plus *add*, minus positions *remove*,
    counted from 1); with *ensure*, only if the current version is still *ensure*."""
    tables = store.crawls
    with store.write():
        crawl = get(store, crawl_id) if store.is_sqlite else tables.get(crawl_id, lock=True)
        if crawl is None:
            raise CrawlNotFound(f"no crawl has the id {crawl_id}")
        if ensure is not None and crawl.ruleset != ensure:
            raise RulesetConflict(
                f"crawl {crawl_id}'s ruleset is at version {crawl.ruleset}, not {ensure}: "
                "someone else changed it; look at `trawl crawl rule list` and try again"
            )
        current = tables.ruleset(crawl_id, crawl.ruleset)
        for position in sorted(set(remove or ()), reverse=True):
            if not 1 <= position <= len(current):
                raise InvalidInput(f"there is no rule {position} (the ruleset has {len(current)})")
            del current[position - 1]
        current += [r.to_json() for r in add or ()]
        version = crawl.ruleset + 1
        if not tables.add_ruleset(crawl_id, version, current, store.clock(), note):
            raise RulesetConflict(f"crawl {crawl_id}'s ruleset changed meanwhile; try again")
        tables.update(crawl_id, "ruleset", version)
        _journal(
            store,
            Journal.CRAWL_RULES,
            crawl_id,
            version=version,
            added=[r.to_json() for r in add or ()],
            removed=sorted(set(remove or ())),
            note=note,
        )
        return version


def progress(
    store: Store,
    crawl_id: int,
    *,
    window: float = 10.0,
    counts: list[tuple[str, bool, str | None, int]] | None = None,
) -> Progress:
    """The crawl's state now; with *counts* (its pages counted elsewhere, as the cached
    gauges have them) the pages are not counted again."""
    tables = store.crawls
    with store.read():
        crawl = get(store, crawl_id)
        counted = tally(tables.counts(crawl_id) if counts is None else counts)
        frontier = tables.frontier(crawl_id)
        size, responses = tables.fetched(crawl_id)
        now = time.time()
        busy = tuple(tables.busy_hosts(crawl_id, now - window))
    status = status_of(crawl, counted)
    return Progress(
        crawl=crawl,
        status=status,
        frontier=frontier,
        bytes=size,
        responses=responses,
        busy=busy,
        at=now,
        **counted,
    )


def status(store: Store, crawl_id: int) -> str:
    """The crawl's status alone: its pages counted by state, none of the rest
    :func:`progress` reads."""
    with store.read():
        crawl = get(store, crawl_id)
        return status_of(crawl, tally(store.crawls.counts(crawl_id)))


def summary(crawl: CrawlRow, rows: list[tuple[str, bool, str | None, int]]) -> Progress:
    """Progress from page counts read elsewhere (the cached gauges): states and status
    only, by the same rules as :func:`progress`."""
    c = tally(rows)
    return Progress(
        crawl=crawl,
        status=status_of(crawl, c),
        ready=c["ready"],
        claimed=c["claimed"],
        done=c["done"],
        failed=c["failed"],
        skipped=c["skipped"],
        parked=c["parked"],
    )


def tally(rows: list[tuple[str, bool, str | None, int]]) -> dict[str, int]:
    """Pages by progress state from (job status, final, waiting, count) rows."""
    out = dict.fromkeys(("ready", "claimed", "done", "failed", "skipped", "parked"), 0)
    for status, final, _waiting, n in rows:
        if status == "running":
            out["claimed"] += n
        elif status == "done":
            out["done"] += n
        elif status == "skipped":
            out["skipped"] += n
        elif not final:
            out["ready"] += n
        elif status == "failed":
            out["failed"] += n
        else:
            out["parked"] += n
    return out


def status_of(crawl: CrawlRow, counts: dict[str, int]) -> str:
    if crawl.aborted:
        return ABORTED
    if counts["ready"]:
        return ACTIVE
    return DRAINING if counts["claimed"] else FINISHED


def _host_rules(seeds: tuple[str, ...]) -> list[Rule]:
    hosts = dict.fromkeys(urls.host(s).rsplit(":", 1)[0] for s in seeds)
    return [host_rule(h) for h in hosts]
