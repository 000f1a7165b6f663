"""Depth: every discovery is recorded; a page's depth is its shortest discovery path.

When a shorter path to a known page appears, its depth drops and the drop is carried to its
descendants through the recorded links (breadth first; a cycle ends because depths only go
down). Pages beyond the depth limit are stored skipped and become due when a shorter path
brings them within the limit: errors and retries never push a page out of scope (the
wpull/ArchiveBot bug that mnbot's relations fix).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trawl.crawl.urls import page_id
from trawl.model.records import NewItem
from trawl.store.crawls import CrawlRow, CrawlTables
from trawl.store.store import Store

PAGE_TAG = "trawl.page"
DEPTH = "depth"


@dataclass(frozen=True, kw_only=True, slots=True)
class Found:
    """A discovered URL: how many hops past its parent (0 for a redirect), whether the
    ruleset the parent was fetched under skips it (``rule:<version>``), and for a redirect
    target, how long the redirect chain to it is."""

    url: str
    hops: int = 1
    skip: str | None = None
    redirects: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Discover:
    """A custom effect: record *found* as discovered from *parent* (``None``: seeds)."""

    crawl_id: int
    parent: str | None
    found: tuple[Found, ...]
    crawl: CrawlRow | None = None  # as the fetch saw it (saves reading it again)

    def apply(self, store: Store, now: float, task: str) -> None:
        tables = store.crawls
        discover(tables, self.crawl_id, self.parent, self.found, now, crawl=self.crawl)


def discover(
    tables: CrawlTables,
    crawl_id: int,
    parent: str | None,
    found: Sequence[Found],
    now: float,
    *,
    crawl: CrawlRow | None = None,
) -> None:
    """Create the new pages, lower the depth of known ones, and carry drops to descendants.

    *crawl* may be a moment old: settings that matter here change rarely, and a page created
    queued in a crawl aborted meanwhile is set aside when it is claimed."""
    crawl = crawl or tables.get(crawl_id)
    if crawl is None or not found:
        return
    base = 0
    if parent is not None:
        row = tables.page(crawl_id, parent, lock=True)  # serialises depth changes through it
        if row is None:
            return
        base = row.depth
        tables.add_links(crawl_id, parent, [(f.url, f.hops) for f in found])
    wanted: dict[str, Found] = {}
    for f in found:
        if f.url not in wanted or f.hops < wanted[f.url].hops:
            wanted[f.url] = f
    known = tables.pages_of(crawl_id, list(wanted))
    fresh = [f for url, f in wanted.items() if url not in known and url != parent]
    lost = _create(tables, crawl, parent, fresh, base, now)
    lower = {
        url: (base + f.hops, parent)
        for url, f in wanted.items()
        if url in lost or (url in known and base + f.hops < known[url].depth)
    }
    _propagate(tables, crawl, lower, now)


def _create(
    tables: CrawlTables,
    crawl: CrawlRow,
    parent: str | None,
    fresh: Sequence[Found],
    base: int,
    now: float,
) -> set[str]:
    """Insert new pages; returns the urls another commit created meanwhile."""
    if not fresh:
        return set()
    items = [
        NewItem(
            id=page_id(crawl.id, f.url),
            tags=((PAGE_TAG, None),),
            data={"crawl": crawl.id, "url": f.url}
            | ({"redirects": f.redirects} if f.redirects else {}),
            niceness=crawl.niceness,
        )
        for f in fresh
    ]
    creator = page_id(crawl.id, parent) if parent is not None else None
    tables.add_page_items(items, now, creator)
    rows = [
        {
            "url": f.url,
            "item_id": page_id(crawl.id, f.url),
            "depth": base + f.hops,
            "via": parent,
            "skip": _skip_reason(crawl, base + f.hops, f.skip),
        }
        for f in fresh
    ]
    inserted = tables.insert_pages(crawl.id, rows, now)
    skipped = [str(r["item_id"]) for r in rows if r["url"] in inserted and r["skip"] is not None]
    tables.skip_jobs(skipped)
    if crawl.aborted:
        for row in rows:
            if row["url"] in inserted and row["skip"] is None:
                tables.park_job(str(row["item_id"]))
    return {f.url for f in fresh} - inserted


def _skip_reason(crawl: CrawlRow, depth: int, rule: str | None) -> str | None:
    if rule is not None:
        return rule
    if crawl.depth_limit is not None and depth > crawl.depth_limit:
        return DEPTH
    return None


def _propagate(
    tables: CrawlTables,
    crawl: CrawlRow,
    lower: dict[str, tuple[int, str | None]],
    now: float,
) -> None:
    """Lower depths where *lower* offers shorter paths, then the descendants', level by level.

    Offers are filtered against the depths already read, so a page that learns nothing new
    costs no write; each write is still guarded (``depth > offer``) against a concurrent
    commit."""
    while lower:
        changed: dict[str, int] = {}
        back_in: list[str] = []
        for url, (depth, via) in lower.items():
            row = tables.lower(crawl.id, url, depth, via)
            if row is None:
                continue
            changed[url] = depth
            if row.skip == DEPTH and _within(crawl, depth):
                tables.set_skip(crawl.id, url, None)
                back_in.append(row.item_id)
        tables.unskip_jobs(back_in, now)
        if crawl.aborted:
            for item_id in back_in:
                tables.park_job(item_id)
        lower = {}
        if not changed:
            break
        for parent, child, hops, depth in tables.children(crawl.id, list(changed)):
            offer = changed[parent] + hops
            if offer < depth and offer < lower.get(child, (depth, None))[0]:
                lower[child] = (offer, parent)


def _within(crawl: CrawlRow, depth: int) -> bool:
    return crawl.depth_limit is None or depth <= crawl.depth_limit
