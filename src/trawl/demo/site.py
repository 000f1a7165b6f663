"""A deterministic generated web site for ``trawl demo``, the tests and the benchmark.

Three hosts (ports on 127.0.0.1): ``main`` with most pages, ``aux`` (cross links, images, a
large binary, gzip-encoded pages) and ``slow`` (robots.txt asks a Crawl-delay). The main
host has the cases a crawler must get right: fan-out and cross links, a depth shortcut
(root -> P -> T and root -> Q -> Q2 -> T, T -> U), an infinite calendar, session-id
duplicates (same content under another URL), a Disallow in robots.txt, and a style sheet
with ``url()``. :meth:`Site.truth` gives each page's true depth from the root.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

Key = tuple[str, str]  # (host label, path with query)

HOSTS = ("main", "aux", "slow")
BIG_SIZE = 5 << 20
PER_SECTION = 40
SLOW_PAGES = 8
CRAWL_DELAY = 0.2


@dataclass(kw_only=True, slots=True)
class Page:
    links: list[Key] = field(default_factory=list)
    kind: str = "html"  # html, css, png, bin
    same_as: Key | None = None  # a session-id duplicate serves this page's body


@dataclass(kw_only=True, slots=True)
class Site:
    pages: dict[Key, Page]
    robots: dict[str, str]
    seed: int
    calendar: bool = True  # /cal/YYYY-MM pages exist for every month

    def page(self, key: Key) -> Page | None:
        found = self.pages.get(key)
        if found is None and self.calendar and key[0] == "main":
            return _calendar(key[1])
        return found

    def links(self, key: Key) -> list[Key]:
        page = self.page(key)
        if page is not None and page.same_as is not None:
            page = self.page(page.same_as)
        return [] if page is None else page.links

    def truth(self, max_depth: int, root: Key = ("main", "/")) -> dict[Key, int]:
        """Each page's shortest link distance from *root*, up to *max_depth*."""
        depths = {root: 0}
        queue = deque([root])
        while queue:
            key = queue.popleft()
            if depths[key] >= max_depth:
                continue
            for child in self.links(key):
                if child not in depths and self.page(child) is not None:
                    depths[child] = depths[key] + 1
                    queue.append(child)
        return depths

    def disallowed(self, key: Key) -> bool:
        return key[0] == "main" and key[1].startswith("/private/")


def generate(pages: int = 500, seed: int = 1) -> Site:
    """The demo site with about *pages* pages (plus the calendar, which never ends)."""
    rng = random.Random(seed)
    site: dict[Key, Page] = {}
    count = max(1, pages - 40)
    sections = max(1, (count + PER_SECTION - 1) // PER_SECTION)
    root = [("main", f"/s/{i}") for i in range(sections)]
    root += [("main", "/short/p"), ("main", "/short/q"), ("main", "/cal/2024-01")]
    root += [("main", "/private/secret"), ("main", "/style.css"), ("aux", "/"), ("slow", "/")]
    root += [("aux", "/bin/big.bin"), ("main", "/page/0?sessionid=5f3a9c")]
    site["main", "/"] = Page(links=root)
    _shortcut(site)
    site["main", "/private/secret"] = Page(links=[("main", "/private/more")])
    site["main", "/private/more"] = Page()
    site["main", "/style.css"] = Page(kind="css", links=[("aux", "/img/bg.png")])
    site["aux", "/img/bg.png"] = Page(kind="png")
    site["aux", "/bin/big.bin"] = Page(kind="bin")
    for i in range(sections):
        members = range(i * PER_SECTION, min(count, (i + 1) * PER_SECTION))
        site["main", f"/s/{i}"] = Page(links=[("main", f"/page/{j}") for j in members])
    for j in range(count):
        site["main", f"/page/{j}"] = Page(links=_page_links(rng, j, count))
        if j % 10 == 0:
            site["aux", f"/img/{j}.png"] = Page(kind="png")
    site["main", "/page/0?sessionid=5f3a9c"] = Page(same_as=("main", "/page/0"))
    for j in range(0, count, 7):
        dup: Key = ("main", f"/page/{j}?sessionid={rng.getrandbits(32):08x}")
        site[dup] = Page(same_as=("main", f"/page/{j}"))
        site["main", f"/s/{j // PER_SECTION}"].links.append(dup)
    _aux(site, rng, count)
    _slow(site)
    robots = {
        "main": "User-agent: *\nDisallow: /private/\n",
        "slow": f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n",
    }
    return Site(pages=site, robots=robots, seed=seed)


def host_labels(hosts: int) -> tuple[str, ...]:
    """The labels of *hosts* hosts: :data:`HOSTS`, then ``h3``, ``h4``... for a broad site."""
    return HOSTS[:hosts] + tuple(f"h{i}" for i in range(len(HOSTS), hosts))


def random_graph(pages: int, seed: int, out_degree: int = 3, hosts: int = 2) -> Site:
    """Pages ``/n/<i>`` on *hosts* hosts with random links; no robots.txt, no calendar."""
    rng = random.Random(seed)
    labels = host_labels(hosts)
    keys: list[Key] = [(labels[i % hosts], f"/n/{i}") for i in range(pages)]
    site = {("main", "/"): Page(links=rng.sample(keys, min(out_degree, pages)))}
    for key in keys:
        site[key] = Page(links=rng.sample(keys, min(out_degree, pages)))
    return Site(pages=site, robots={}, seed=seed, calendar=False)


def _shortcut(site: dict[Key, Page]) -> None:
    site["main", "/short/p"] = Page(links=[("main", "/short/t")])
    site["main", "/short/q"] = Page(links=[("main", "/short/q2")])
    site["main", "/short/q2"] = Page(links=[("main", "/short/t")])
    site["main", "/short/t"] = Page(links=[("main", "/short/u")])
    site["main", "/short/u"] = Page()


def _page_links(rng: random.Random, j: int, count: int) -> list[Key]:
    links: list[Key] = [("main", f"/page/{rng.randrange(count)}") for _ in range(3)]
    links.append(("main", f"/s/{j // PER_SECTION}"))
    if j % 10 == 0:
        links.append(("aux", f"/img/{j}.png"))
    if j % 13 == 0:
        links.append(("aux", f"/a/{j % 20}"))
    return links


def _aux(site: dict[Key, Page], rng: random.Random, count: int) -> None:
    site["aux", "/"] = Page(links=[("aux", f"/a/{i}") for i in range(20)])
    for i in range(20):
        site["aux", f"/a/{i}"] = Page(links=[("main", f"/page/{rng.randrange(count)}")])


def _slow(site: dict[Key, Page]) -> None:
    site["slow", "/"] = Page(links=[("slow", f"/sl/{i}") for i in range(SLOW_PAGES)])
    for i in range(SLOW_PAGES):
        site["slow", f"/sl/{i}"] = Page(links=[("slow", "/")])


def _calendar(path: str) -> Page | None:
    if not path.startswith("/cal/"):
        return None
    try:
        year, month = (int(p) for p in path[5:].split("-"))
    except ValueError:
        return None
    if not 1 <= month <= 12 or not 1 <= year <= 9999:
        return None
    after = (year + month // 12, month % 12 + 1)
    before = (year - (month == 1), (month - 2) % 12 + 1)
    return Page(links=[("main", f"/cal/{y:04d}-{m:02d}") for y, m in (after, before)])


def render(site: Site, key: Key, origin: dict[str, str]) -> tuple[str, bytes] | None:
    """(content type, body) of a page; *origin* maps host labels to ``http://host:port``."""
    page = site.page(key)
    if page is None:
        return None
    if page.same_as is not None:
        return render(site, page.same_as, origin)
    if page.kind == "bin":
        return "application/octet-stream", random.Random(site.seed).randbytes(BIG_SIZE)
    if page.kind == "png":
        return "image/png", b"\x89PNG\r\n\x1a\n" + key[1].encode() * 8
    hrefs = [_href(key, link, origin) for link in page.links]
    if page.kind == "css":
        return "text/css", "".join(f"body {{ background: url('{h}') }}\n" for h in hrefs).encode()
    styled = key[0] == "main" and ("main", "/style.css") in site.pages
    return "text/html; charset=utf-8", _html(key, hrefs, styled)


def _href(here: Key, link: Key, origin: dict[str, str]) -> str:
    return link[1] if link[0] == here[0] else origin[link[0]] + link[1]


def _html(key: Key, hrefs: list[str], styled: bool) -> bytes:
    items = "".join(_tag(h) for h in hrefs)
    title = f"{key[0]} {key[1]}"
    style = '<link rel="stylesheet" href="/style.css">' if styled else ""
    return (
        f"<!doctype html><html><head><title>{title}</title>{style}</head>"
        f"<body><h1>{title}</h1><ul>{items}</ul></body></html>"
    ).encode()


def _tag(href: str) -> str:
    if href.endswith(".png"):
        return f'<li><img src="{href}" alt=""></li>'
    return f'<li><a href="{href}#top">{href}</a></li>'


def keys(site: Site) -> Iterator[Key]:
    return iter(site.pages)
