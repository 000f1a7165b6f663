"""What every dashboard route shares: how it declares what it needs, how an action answers
(303 to a page, with a one-time message), and how form fields are read and checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote

from litestar import Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.handlers import HTTPRouteHandler
from litestar.response import Redirect

from trawl.model.errors import InvalidInput
from trawl.server.auth import PUBLIC
from trawl.server.dashboard import render
from trawl.server.dashboard.guard import session_of

FLASH = "trawl_flash"  # a one-time message shown by the page an action redirects to
PREFIX = "/ui"


Route = Callable[[Callable[..., Any]], HTTPRouteHandler]


def view(path: str, *, need: str | None = "read") -> Route:
    """A page (GET) needing a session of scope *need* (None: anyone)."""
    return get(path, opt={"scope": PUBLIC, "session": need}, include_in_schema=False)


def action(path: str, *, need: str | None = "write") -> Route:
    """A form's target (POST): a session of scope *need* and its CSRF token (None: anyone;
    the route checks its own form)."""
    return post(
        path, opt={"scope": PUBLIC, "session": need}, include_in_schema=False, status_code=303
    )


def done(to: str, message: str) -> Redirect:
    """Back to page *to*, which shows *message* once."""
    redirect = Redirect(to, status_code=303)
    redirect.cookies.append(
        Cookie(key=FLASH, value=quote(message[:300]), httponly=True, samesite="strict", path="/")
    )
    return redirect


def show(
    request: Request[Any, Any, Any], name: str, status: int = 200, **context: Any
) -> Response[str]:
    """A page for the signed-in user, with the message an action left for it."""
    flash = request.cookies.get(FLASH)
    response = render.page(
        name,
        status=status,
        session=session_of(request),
        path=request.url.path,
        flash=unquote(flash) if flash else None,
        **context,
    )
    if flash:
        response.delete_cookie(FLASH, path="/")
    return response


async def form(request: Request[Any, Any, Any]) -> dict[str, list[str]]:
    """The form's fields, each with every value it was sent with."""
    data = await request.form()
    return {key: [v for v in data.getall(key) if isinstance(v, str)] for key in data}


def field(fields: dict[str, list[str]], name: str, *, required: bool = True) -> str | None:
    values = fields.get(name) or []
    value = values[0].strip() if values else ""
    if not value:
        if required:
            raise InvalidInput(f"the form's field {name!r} is empty")
        return None
    return value


def whole(text: str | None, name: str, *, low: int, high: int) -> int:
    """*text* as a whole number within [low, high], or a message naming the field."""
    try:
        value = int(text or "")
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, got {text!r}") from None
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low:,} and {high:,}, got {value:,}")
    return value


def routes_of(*modules: Any) -> list[HTTPRouteHandler]:
    """The route handlers a module lists in its ROUTES."""
    return [handler for module in modules for handler in module.ROUTES]
