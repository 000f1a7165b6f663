"""Every response says nosniff: API answers, problems, the dashboard's pages and static
files (issue 56.15)."""

from __future__ import annotations

from litestar.testing import TestClient

from trawl.server.app import create_app


def test_every_kind_of_response_carries_nosniff(sqlite_url: str) -> None:
    with TestClient(create_app(sqlite_url, connections=2, token_cache=0.0)) as http:
        for path in ("/health", "/items", "/no-such-path", "/", "/static/dashboard.js"):
            response = http.get(path)
            assert response.headers.get("x-content-type-options") == "nosniff", (
                path,
                response.status_code,
            )
