"""Who may see and do what on the dashboard: a signed-in session for every page, its CSRF
token on every form, and the write scope for every action.

Each dashboard route says in its ``opt`` what it needs: ``session`` is ``read`` to look,
``write`` to act (as the API's scopes), or absent for the sign-in page and static files.
The API's bearer guard lets dashboard routes through (their ``scope`` is public); this
guard is theirs.
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from trawl.server.dashboard.session import COOKIE, Session, Sessions

CSRF_FIELD = "_csrf"  # the hidden field every form carries
CSRF_HEADER = "x-csrf-token"  # or the header htmx requests carry
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class SignInNeeded(Exception):
    """No valid session: the answer is the sign-in page."""


class CsrfRefused(PermissionDeniedException):
    """A form came without the session's CSRF token (another site's page, or a stale one)."""


async def guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    need = handler.opt.get("session")
    if need is None:
        return
    sessions: Sessions = connection.app.state.sessions
    session = await sessions.read(connection.cookies.get(COOKIE))
    if session is None:
        raise SignInNeeded
    if isinstance(connection, Request) and connection.method in UNSAFE:
        await check_csrf(connection, session.csrf)
    if not session.allows(need):
        raise PermissionDeniedException(
            f"this needs a token with scope {need!r}: you signed in with {session.name!r},"
            f" whose scope is {session.scope!r}"
        )
    connection.state.session = session


async def check_csrf(request: Request[Any, Any, Any], expected: str) -> None:
    """Refuse the request unless it carries *expected* as its CSRF field or header."""
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not sent or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise CsrfRefused(
            "the form's CSRF token is missing or out of date: reload the page and try again"
        )


def session_of(request: Request[Any, Any, Any]) -> Session:
    session: Session = request.state.session
    return session
