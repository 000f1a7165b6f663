"""Response headers every answer of the server carries: API answers, problems for paths no
route matches, the dashboard's static files."""

from __future__ import annotations

from litestar.datastructures import MutableScopeHeaders
from litestar.types import Message, Scope

# Browsers must not guess a response's type from its bytes: a crawled body or a stored value
# served back as text must never run as script or style (issue 56.15).
SECURITY_HEADERS = {"x-content-type-options": "nosniff"}


async def security_headers(message: Message, scope: Scope) -> None:
    """A ``before_send`` hook: Litestar runs it on every message it sends, including the
    404s it answers before any middleware or route."""
    if message["type"] == "http.response.start":
        headers = MutableScopeHeaders.from_message(message)
        for name, value in SECURITY_HEADERS.items():
            if name not in headers:
                headers[name] = value
