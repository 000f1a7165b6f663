"""Signing in with an API token, and out.

The sign-in form is CSRF-protected too (a page elsewhere must not sign a browser in as
someone else): the page sets a random cookie and the form carries the same value, which a
page on another site can neither read nor set (double submit)."""

from __future__ import annotations

import hmac
import secrets
import time
from typing import Any

from litestar import Request, Response
from litestar.datastructures import Cookie
from litestar.response import Redirect

from trawl.server.dashboard import render
from trawl.server.dashboard.guard import CSRF_FIELD
from trawl.server.dashboard.handlers import action, view
from trawl.server.dashboard.session import COOKIE, LIFETIME, Sessions

FORM_COOKIE = "trawl_signin"


def _local(target: str | None) -> str:
    """Where to go after signing in: a path of this site only (never //other.example)."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def _form(
    request: Request[Any, Any, Any],
    *,
    status: int = 200,
    error: str | None = None,
    then: str | None = None,
) -> Response[str]:
    """The sign-in page; after it, the browser goes to *then* (or the ?next= asked for)."""
    nonce = secrets.token_urlsafe(16)
    response = render.page(
        "signin.html",
        status=status,
        session=None,
        path=request.url.path,
        flash=None,
        csrf=nonce,
        error=error,
        next=_local(then or request.query_params.get("next")),
    )
    response.set_cookie(_cookie(request, FORM_COOKIE, nonce, max_age=3600))
    return response


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cookie(request: Request[Any, Any, Any], key: str, value: str, max_age: int) -> Cookie:
    return Cookie(
        key=key,
        value=value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


@view("/ui/signin", need=None)
async def signin_page(request: Request[Any, Any, Any]) -> Response[str]:
    return _form(request)


@action("/ui/signin", need=None)
async def signin(request: Request[Any, Any, Any]) -> Response[Any]:
    """Check the token; on success a session cookie and on to the page asked for."""
    fields = await request.form()
    then = _text(fields.get("next"))
    sent, expected = _text(fields.get(CSRF_FIELD)), request.cookies.get(FORM_COOKIE)
    if not sent or not expected or not hmac.compare_digest(sent, expected):
        error = "The form had expired: please try again."
        return _form(request, status=403, error=error, then=then)
    text = _text(fields.get("token")).strip()
    if not text:
        error = "Paste a token (make one with: trawl token create NAME)."
        return _form(request, status=400, error=error, then=then)
    sessions: Sessions = request.app.state.sessions
    started = await sessions.start(text, time.time())
    if started is None:
        error = "That token is not known or was revoked (see: trawl token list)."
        return _form(request, status=401, error=error, then=then)
    cookie, _ = started
    redirect = Redirect(_local(then), status_code=303)
    redirect.cookies.append(_cookie(request, COOKIE, cookie, max_age=int(LIFETIME)))
    redirect.cookies.append(Cookie(key=FORM_COOKIE, value="", max_age=0, path="/"))
    return redirect


@action("/ui/signout", need="read")
async def signout(request: Request[Any, Any, Any]) -> Redirect:
    redirect = Redirect("/ui/signin", status_code=303)
    redirect.cookies.append(Cookie(key=COOKIE, value="", max_age=0, path="/"))
    return redirect


ROUTES = [signin_page, signin, signout]
