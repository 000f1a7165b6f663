"""Crawls: the list with live progress; a crawl's page (rate, states, depths, hosts, pages,
rules) and a page's attempts; and the operator's actions, through the same crawl
operations as the API and the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from litestar import Request, Response
from litestar.params import Parameter
from litestar.response import Redirect

from trawl.crawl import operations
from trawl.crawl import rules as crawl_rules
from trawl.crawl.operations import RulesetConflict
from trawl.model.errors import InvalidInput, NotFound
from trawl.runtime.dbmetrics import DbMetrics
from trawl.server import cursors
from trawl.server.dashboard import figures, pieces
from trawl.server.dashboard.handlers import FLASH, action, done, field, form, show, view, whole
from trawl.server.stores import Stores
from trawl.store.listings import CrawlPage
from trawl.store.store import Store

PAGES_SHOWN = 50
PageStatus = Literal["queued", "running", "done", "failed", "skipped"]
STATUSES = ("queued", "running", "done", "failed", "skipped")
Before = Annotated[int | None, Parameter(ge=1, le=cursors.MAX_ID)]


@dataclass(frozen=True, kw_only=True, slots=True)
class PagesView:
    rows: list[CrawlPage]
    status: str | None
    search: str
    next: str | None  # the last URL shown, when there may be more


@dataclass(frozen=True, kw_only=True, slots=True)
class RuleEdit:
    """An edit of the rules as the form sent it, shown back on a conflict."""

    based_on: int
    add: crawl_rules.Rule | None
    remove: list[int]


@view("/ui/crawls")
async def crawl_list(
    request: Request[Any, Any, Any], stores: Stores, gauges: DbMetrics, before: Before = None
) -> Response[str]:
    listed = await stores.run(lambda s: figures.crawl_list(s, gauges, before, wait=False))
    return show(
        request, "crawls.html", view=listed, pieces=pieces.crawl_list(listed), before=before
    )


def _pages(store: Store, crawl_id: int, status: str | None, search: str, after: str) -> PagesView:
    with store.read():
        rows = store.listings.crawl_pages(
            crawl_id, status=status, after=after, limit=PAGES_SHOWN, containing=search or None
        )
    more = rows[-1].url if len(rows) == PAGES_SHOWN else None
    return PagesView(rows=rows, status=status, search=search, next=more)


def _crawl_page(
    store: Store,
    gauges: DbMetrics | None,
    crawl_id: int,
    status: str | None,
    search: str,
    after: str,
) -> dict[str, Any]:
    found = figures.crawl(store, crawl_id, gauges)
    version, rules = operations.rules(store, crawl_id)
    return {
        "view": found,
        "pieces": pieces.crawl(found),
        "version": version,
        "rules": rules,
        "pages": _pages(store, crawl_id, status, search, after),
        "kinds": crawl_rules.KINDS,
        "statuses": STATUSES,
        "after": after,
    }


@view("/ui/crawls/{crawl_id:int}")
async def crawl_page(
    request: Request[Any, Any, Any],
    stores: Stores,
    gauges: DbMetrics,
    crawl_id: cursors.PathId,
    status: PageStatus | None = None,
    q: Annotated[str, Parameter(max_length=500)] = "",
    after: Annotated[str, Parameter(max_length=10_000)] = "",
) -> Response[str]:
    # right after an action on it the counts must show its effect: counted now, not cached
    cached = None if FLASH in request.cookies else gauges
    context = await stores.run(lambda s: _crawl_page(s, cached, crawl_id, status, q.strip(), after))
    return show(request, "crawl.html", conflict=None, **context)


@view("/ui/crawls/{crawl_id:int}/page")
async def page_attempts(
    request: Request[Any, Any, Any],
    stores: Stores,
    crawl_id: cursors.PathId,
    url: Annotated[str, Parameter(min_length=1, max_length=10_000)],
) -> Response[str]:
    def run(store: Store) -> dict[str, Any]:
        crawl = operations.get(store, crawl_id)
        with store.read():
            page = store.crawls.page(crawl_id, url)
            if page is None:
                raise NotFound(f"crawl {crawl_id} has no page {url!r}")
            attempts = store.listings.page_attempts(crawl_id, url)
        return {"crawl": crawl, "page": page, "attempts": attempts}

    return show(request, "page.html", **await stores.run(run))


@action("/ui/crawls/{crawl_id:int}/abort")
async def abort(stores: Stores, crawl_id: cursors.PathId) -> Redirect:
    parked = await stores.run(lambda s: operations.abort(s, crawl_id))
    return done(f"/ui/crawls/{crawl_id}", f"Aborted: {parked:,} pages parked.")


@action("/ui/crawls/{crawl_id:int}/resume")
async def resume(stores: Stores, crawl_id: cursors.PathId) -> Redirect:
    count = await stores.run(lambda s: operations.resume(s, crawl_id))
    return done(f"/ui/crawls/{crawl_id}", f"Resumed: {count:,} pages due again.")


@action("/ui/crawls/{crawl_id:int}/concurrency")
async def concurrency(
    request: Request[Any, Any, Any], stores: Stores, crawl_id: cursors.PathId
) -> Redirect:
    value = whole(field(await form(request), "value"), "concurrency", low=1, high=10_000)
    await stores.run(lambda s: operations.set_concurrency(s, crawl_id, value))
    return done(f"/ui/crawls/{crawl_id}", f"Concurrency is now {value}.")


@action("/ui/crawls/{crawl_id:int}/niceness")
async def niceness(
    request: Request[Any, Any, Any], stores: Stores, crawl_id: cursors.PathId
) -> Redirect:
    top = cursors.MAX_NICENESS
    value = whole(field(await form(request), "value"), "niceness", low=-top, high=top)
    changed = await stores.run(lambda s: operations.set_niceness(s, crawl_id, value))
    return done(f"/ui/crawls/{crawl_id}", f"Niceness is now {value} ({changed:,} pages).")


def _rule_edit(fields: dict[str, list[str]]) -> RuleEdit:
    based_on = whole(field(fields, "ensure"), "the rules' version", low=0, high=cursors.MAX_ID)
    remove = [whole(p, "a rule's position", low=1, high=100_000) for p in fields.get("remove", [])]
    match = field(fields, "match", required=False)
    add = None
    if match is not None:
        kind = field(fields, "kind") or ""
        add = crawl_rules.make_rule(
            kind, match, _rule_value(kind, field(fields, "value", required=False))
        )
    if add is None and not remove:
        raise InvalidInput("nothing to change: give a pattern to add, or tick rules to remove")
    return RuleEdit(based_on=based_on, add=add, remove=remove)


def _rule_value(kind: str, text: str | None) -> Any:
    if kind in ("accept", "skip"):
        if text is None or text.lower() in ("true", "yes", "1"):
            return True
        if text.lower() in ("false", "no", "0"):
            return False
        raise InvalidInput(f"an {kind} rule's value is true or false, not {text!r}")
    return text


@action("/ui/crawls/{crawl_id:int}/rules")
async def edit_rules(
    request: Request[Any, Any, Any], stores: Stores, gauges: DbMetrics, crawl_id: cursors.PathId
) -> Response[Any]:
    """A new ruleset version, made only if the rules are still the version the form
    showed; otherwise the page again with the conflict, the current rules and the edit."""
    edit = _rule_edit(await form(request))

    def run(store: Store) -> int | dict[str, Any]:
        try:
            return operations.edit_rules(
                store,
                crawl_id,
                add=[edit.add] if edit.add else [],
                remove=edit.remove,
                ensure=edit.based_on,
                note="dashboard",
            )
        except RulesetConflict as conflict:
            page = _crawl_page(store, gauges, crawl_id, None, "", "")
            return {**page, "conflict": (conflict, edit)}

    result = await stores.run(run)
    if isinstance(result, dict):
        return show(request, "crawl.html", status=409, **result)
    return done(f"/ui/crawls/{crawl_id}#rules", f"Rules saved as version {result}.")


ROUTES = [
    crawl_list,
    crawl_page,
    page_attempts,
    abort,
    resume,
    concurrency,
    niceness,
    edit_rules,
]
