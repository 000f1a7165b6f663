"""An API over a fresh database on each backend, with a token of each scope."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.integration.helpers import task
from tests.support.uvicorn_thread import in_thread
from trawl.server.app import create_app
from trawl.store.store import Store


@dataclass
class Api:
    url: str  # the database's
    http: TestClient  # type: ignore[type-arg]
    tokens: dict[str, str]  # scope -> token

    def as_(self, scope: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[scope]}"}


def make_tokens(url: str) -> dict[str, str]:
    with Store(url) as store:
        store.register_tasks([task("price", ("product",)), task("stock", ("product",))])
        return {
            s: store.tokens.create(f"t-{s}", s, store.clock()) for s in ("read", "write", "admin")
        }


@pytest.fixture
def api(db_url: str) -> Iterator[Api]:
    tokens = make_tokens(db_url)
    app = create_app(db_url, connections=4, token_cache=0.0)
    with TestClient(app) as http:
        http.headers["Authorization"] = f"Bearer {tokens['admin']}"
        yield Api(url=db_url, http=http, tokens=tokens)


@dataclass
class Served:
    base: str  # http://127.0.0.1:PORT
    db: str
    tokens: dict[str, str]


@contextmanager
def serving(url: str, **options: Any) -> Iterator[str]:
    """A real server (uvicorn, a thread of this process) on a free port of 127.0.0.1."""
    with in_thread(create_app(url, **options), "api") as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def served(db_url: str) -> Iterator[Served]:
    tokens = make_tokens(db_url)
    with serving(db_url, token_cache=0.0) as base:
        yield Served(base=base, db=db_url, tokens=tokens)
