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
    discover_many(tables, crawl_id, [(parent, found)], now, crawl=crawl)


Finds = Sequence[tuple[str | None, Sequence[Found]]]  # (parent or None for seeds, found)


def discover_many(
    tables: CrawlTables, crawl_id: int, finds: Finds, now: float, *, crawl: CrawlRow | None = None
) -> None:
    """:func:`discover` for several parents at once (a commit's fetches), with the same
    outcome as one after another, in order, in a handful of statements: a new page is
    created by the first parent that found it, at the shortest depth any of them offers
    (via the first parent to offer it); known pages are lowered to the shortest offer."""
    crawl = crawl or tables.get(crawl_id)
    finds = [(parent, found) for parent, found in finds if found]
    if crawl is None or not finds:
        return
    parents = sorted({p for p, _ in finds if p is not None})
    bases = tables.pages_of(crawl_id, parents, lock=True)  # serialises depth changes
    links = [(parent, f.url, f.hops) for parent, found in finds if parent in bases for f in found]
    tables.add_links(crawl_id, links)
    offers: dict[str, _Offer] = {}
    for parent, found in finds:
        if parent is not None and parent not in bases:
            continue  # its page is gone
        base = 0 if parent is None else bases[parent].depth
        for f in found:
            if f.url == parent:
                continue
            offer = offers.get(f.url)
            if offer is None:
                offers[f.url] = _Offer(f, parent, base + f.hops)
                continue
            if offer.first_parent == parent and f.hops < offer.first.hops:
                offer.first = f  # a parent's shortest link to the page is the one it made
            if base + f.hops < offer.depth:
                offer.depth, offer.via = base + f.hops, parent
    known = tables.pages_of(crawl_id, list(offers))
    fresh = {url: o for url, o in offers.items() if url not in known}
    lost = _create(tables, crawl, fresh, now)
    lower = {
        url: (o.depth, o.via)
        for url, o in offers.items()
        if url in lost or (url in known and o.depth < known[url].depth)
    }
    _propagate(tables, crawl, lower, now)


class _Offer:
    """The shortest path to a page among a commit's finds: the first find of it (which
    creates it, with that find's rule and redirect chain) and the best depth and via."""

    __slots__ = ("depth", "first", "first_parent", "via")

    def __init__(self, first: Found, via: str | None, depth: int) -> None:
        self.first, self.first_parent = first, via
        self.via, self.depth = via, depth


def _create(tables: CrawlTables, crawl: CrawlRow, fresh: dict[str, _Offer], now: float) -> set[str]:
    """Insert new pages; returns the urls another commit created meanwhile."""
    if not fresh:
        return set()
    by_creator: dict[str | None, list[NewItem]] = {}
    for url, o in fresh.items():
        item = NewItem(
            id=page_id(crawl.id, url),
            tags=((PAGE_TAG, None),),
            data={"crawl": crawl.id, "url": url}
            | ({"redirects": o.first.redirects} if o.first.redirects else {}),
            niceness=crawl.niceness,
        )
        by_creator.setdefault(o.first_parent, []).append(item)
    for creator, items in by_creator.items():
        by = page_id(crawl.id, creator) if creator is not None else None
        tables.add_page_items(items, now, by)
    rows = [
        {
            "url": url,
            "item_id": page_id(crawl.id, url),
            "depth": o.depth,
            "via": o.via,
            "skip": _skip_reason(crawl, o.depth, o.first.skip),
        }
        for url, o in fresh.items()
    ]
    inserted = tables.insert_pages(crawl.id, rows, now)
    skipped = [str(r["item_id"]) for r in rows if r["url"] in inserted and r["skip"] is not None]
    tables.skip_jobs(skipped)
    if crawl.aborted:
        for row in rows:
            if row["url"] in inserted and row["skip"] is None:
                tables.park_job(str(row["item_id"]))
    return set(fresh) - inserted


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
