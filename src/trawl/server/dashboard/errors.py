"""Errors on dashboard routes as pages a person reads (the API answers problem details):
no session sends the browser to sign in; anything else is a page that says what was wrong,
with the same status the API would give."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.response import Redirect

from trawl.server import problems
from trawl.server.dashboard import render
from trawl.server.dashboard.guard import SignInNeeded

log = logging.getLogger("trawl.server.dashboard")
SIGNIN = "/ui/signin"


def handle(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
    if isinstance(error, SignInNeeded):
        return _to_signin(request)
    status, title, detail = _describe(request, error)
    session = getattr(request.state, "session", None)
    return render.page(
        "error.html",
        status=status,
        session=session,
        path=request.url.path,
        flash=None,
        title=title,
        detail=detail,
        status_code=status,
    )


def _to_signin(request: Request[Any, Any, Any]) -> Response[Any]:
    there = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    target = SIGNIN + "?" + urlencode({"next": there}) if request.method == "GET" else SIGNIN
    if request.headers.get("hx-request"):  # an htmx swap would put the page inside a page
        return Response("", status_code=401, headers={"HX-Redirect": target})
    if request.headers.get("accept", "").startswith("text/event-stream"):
        return Response("sign in again", status_code=401, media_type="text/plain")
    return Redirect(target, status_code=303)


def _describe(request: Request[Any, Any, Any], error: Exception) -> tuple[int, str, str]:
    if isinstance(error, ValidationException):
        return 400, "That request is not right", str(error.detail)
    if isinstance(error, HTTPException):
        titles = {403: "Not allowed", 404: "Not found", 405: "Not allowed here"}
        return error.status_code, titles.get(error.status_code, "Refused"), error.detail
    known = problems.classify(error)
    if known is not None:
        status, _, title = known
        return status, title, str(error)
    log.exception("%s %s failed", request.method, request.url.path, exc_info=error)
    return 500, "Something went wrong", "the server's log has the details"
