"""A host asking to be left alone: a 429, or a 503 that says when to come back, holds off
the whole host (page fetches and a browser's sub-requests alike)."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

from trawl.crawl.client import Response

RETRY_AFTER_DEFAULT = 10.0  # a 429 that does not say how long
RETRY_AFTER_MAX = 3600.0


def block_of(resp: Response, host: str) -> tuple[str, float] | None:
    """(host, until) if *resp* holds off its host, else None."""
    asked = resp.header("retry-after")
    if resp.status == 429 or (resp.status == 503 and asked):
        return host, time.time() + retry_after(asked)
    return None


def retry_after(value: str | None) -> float:
    """Seconds a Retry-After header asks for (a number or an HTTP date), capped."""
    if not value:
        return RETRY_AFTER_DEFAULT
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return RETRY_AFTER_DEFAULT
    return max(0.0, min(RETRY_AFTER_MAX, seconds))
