"""Errors as RFC 9457 problem details (``application/problem+json``), each naming what was
wrong. trawl's own errors map to a status by kind; anything unexpected is a 500 that is
logged with its traceback and says no more than that to the client."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from trawl.crawl.operations import CrawlNotFound, RulesetConflict
from trawl.model.errors import (
    AliasError,
    Conflict,
    DatabaseUnavailable,
    InvalidInput,
    ItemExists,
    ItemNotFound,
    NotFound,
    TrawlError,
    UnknownTask,
)

log = logging.getLogger("trawl.server")

MEDIA_TYPE = "application/problem+json"
TYPES = "https://trawl.dev/problems/"  # + a slug: stable names clients may switch on

# (status, type slug, title) per kind of trawl error, most specific first
_KINDS: list[tuple[type[Exception], int, str, str]] = [
    (ItemNotFound, 404, "not-found", "No such item"),
    (CrawlNotFound, 404, "not-found", "No such crawl"),
    (UnknownTask, 404, "not-found", "No such task"),
    (NotFound, 404, "not-found", "Not found"),
    (RulesetConflict, 409, "conflict", "The crawl's rules changed since you read them"),
    (ItemExists, 409, "conflict", "Already exists"),
    (AliasError, 409, "conflict", "Alias conflict"),
    (Conflict, 409, "conflict", "Conflict"),
    (InvalidInput, 400, "invalid-input", "Invalid input"),
    (DatabaseUnavailable, 503, "database-unavailable", "The database is unavailable"),
]


def problem(
    request: Request[Any, Any, Any],
    status: int,
    slug: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response[dict[str, Any]]:
    body = {
        "type": TYPES + slug,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
        **extra,
    }
    return Response(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def _named(error: ValidationException, errors: list[Any]) -> str:
    """The first thing wrong, naming where: "body items[1].tags[0][1]: Expected `str | null`,
    got `int`" rather than Litestar's "Validation failed for POST /items"."""
    first = errors[0] if errors and isinstance(errors[0], dict) else None
    if first is None:
        return str(error.detail)
    where = str(first.get("key") or "").removeprefix("$.").removeprefix("$")
    source = first.get("source") or "body"
    message = str(first.get("message") or error.detail)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source} {where}: {message}{more}" if where else f"{source}: {message}{more}"


def handle(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    if isinstance(error, ValidationException):
        errors = error.extra if isinstance(error.extra, list) else []
        return problem(request, 400, "invalid-input", "Invalid input", _named(error, errors))

    if isinstance(error, HTTPException):
        slug = {401: "unauthorized", 403: "forbidden", 404: "not-found", 405: "method"}.get(
            error.status_code, "http"
        )
        return problem(
            request,
            error.status_code,
            slug,
            _title(error.status_code),
            error.detail,
            headers=error.headers,
        )
    known = classify(error)
    if known is not None:
        status, slug, title = known
        return problem(request, status, slug, title, str(error))
    log.exception("%s %s failed", request.method, request.url.path, exc_info=error)
    return problem(
        request, 500, "internal", "Internal server error", "the server's log has the details"
    )


def classify(error: Exception) -> tuple[int, str, str] | None:
    """(status, type slug, title) of one of trawl's own errors; None for anything else."""
    for kind, status, slug, title in _KINDS:
        if isinstance(error, kind):
            return status, slug, title
    if isinstance(error, TrawlError):
        return 400, "invalid-input", "Invalid input"
    return None


def _title(status: int) -> str:
    titles = {
        400: "Bad request",
        401: "A bearer token is needed",
        403: "The token's scope is too small",
        404: "Not found",
        405: "Method not allowed",
        413: "Request too large",
    }
    return titles.get(status, "HTTP error")
