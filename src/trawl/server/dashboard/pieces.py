"""The pieces of the live pages, rendered from figures: a page renders them inline when it is
first served, and the feed renders the same templates again as the figures change, so the
first view and every update look the same.

Pieces hold no forms and nothing of one session (a CSRF token, a scope): the feed sends
the same text to every page watching a topic.
"""

from __future__ import annotations

from typing import Any

from trawl.server.dashboard import figures
from trawl.server.dashboard.feed import Rates, Reading
from trawl.server.dashboard.render import fragment


def task_rates(overview: figures.Overview, rates: Rates) -> dict[str, Any]:
    """Per task: its rate now and its series, for the overview's chart column."""
    return {
        t.counts.task: {
            "rate": rates.rate(t.counts.task, overview.at),
            "series": rates.series(t.counts.task, overview.at),
        }
        for t in overview.tasks
    }


def overview(view: figures.Overview, rates: Rates) -> dict[str, str]:
    context = {"view": view, "rates": task_rates(view, rates), "now": view.at}
    return {
        "tasks": fragment("pieces/tasks.html", **context),
        "summary": fragment("pieces/summary.html", **context),
    }


def crawl_list(view: figures.CrawlList) -> dict[str, str]:
    return {"crawls": fragment("pieces/crawl_rows.html", view=view)}


def crawl(view: figures.CrawlFigures) -> dict[str, str]:
    now = view.progress.at
    return {
        "counts": fragment("pieces/crawl_counts.html", view=view, now=now),
        "depths": fragment("pieces/crawl_depths.html", view=view, now=now),
        "hosts": fragment("pieces/crawl_hosts.html", view=view, now=now),
    }


def alert(error: str | None) -> str:
    return fragment("pieces/alert.html", error=error)


def render(reading: Reading, rates: Rates) -> dict[str, str]:
    """Every piece the reading has, keyed ``topic/event`` (``*`` for every topic)."""
    out = {"*/alert": alert(reading.error)}
    if reading.overview is not None:
        out |= {f"overview/{k}": v for k, v in overview(reading.overview, rates).items()}
    if reading.crawl_list is not None:
        out |= {f"crawls/{k}": v for k, v in crawl_list(reading.crawl_list).items()}
    for crawl_id, view in reading.crawls.items():
        out |= {f"crawl:{crawl_id}/{k}": v for k, v in crawl(view).items()}
    return out
