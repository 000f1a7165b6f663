"""RabbitMQ and Redis for the cluster tests: the machine's own (or TRAWL_TEST_AMQP /
TRAWL_TEST_REDIS). Absent outside CI, the tests skip saying what to start; under CI=true
they fail instead, so a CI run never passes without them."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import pytest

AMQP = os.environ.get("TRAWL_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
REDIS = os.environ.get("TRAWL_TEST_REDIS", "redis://127.0.0.1:6379/0")


def _reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), 2
        ):
            return True
    except OSError:
        return False


def need(url: str, default_port: int, what: str) -> str:
    if _reachable(url, default_port):
        return url
    variable = "TRAWL_TEST_AMQP" if url.startswith("amqp") else "TRAWL_TEST_REDIS"
    message = f"{what} is not reachable at {url}: start it, or point {variable} at one"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def amqp_url() -> str:
    return need(AMQP, 5672, "RabbitMQ")


@pytest.fixture
def redis_url() -> str:
    return need(REDIS, 6379, "Redis")
