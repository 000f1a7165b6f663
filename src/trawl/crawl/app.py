"""The crawl's trawl App: one task, ``trawl.fetch``, run on every item tagged ``trawl.page``.

``trawl worker trawl.crawl.app:app`` adds a worker to every active crawl in the database
(another machine, on PostgreSQL); ``trawl crawl`` runs one in-process.
"""

from __future__ import annotations

from typing import Any

from trawl.crawl import state
from trawl.crawl.frontier import PAGE_TAG
from trawl.crawl.task import fetch_page
from trawl.runtime.actor.spec import Actor, ActorInfo
from trawl.runtime.app import App
from trawl.store.crawls import FETCH_TASK

DEFAULT_LEASE = 60.0  # how long a killed worker's pages stay claimed


def make_app(db: str | None = None, *, lease: float = DEFAULT_LEASE) -> App:
    """The crawl app; *lease* is the fetch task's timeout (renewed while a fetch runs)."""
    crawl_app = App(db)
    crawl_app.task(
        fetch_page,
        name=FETCH_TASK,
        tags=[PAGE_TAG],
        timeout=lease,
        retries=3,
        backoff="1s",
        not_found_limit=1,  # 404, 410 and other 4xx are final at once
        # Under `trawl run` each fetch actor owns its process's browser: it is closed as
        # the actor stops, not left to die with the process.
        actor=Actor(on_shutdown=_release),
    )
    return crawl_app


async def _release(actor: ActorInfo, resource: Any) -> None:
    """Close this process's browser, connections and WARC files."""
    await state.shutdown()


app = make_app()
