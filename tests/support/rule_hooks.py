"""A crawl rule hook for the tests (``tests.support.rule_hooks:mobile``)."""

from __future__ import annotations

from typing import Any


def mobile(url: str, settings: Any) -> dict[str, str]:
    return {"user_agent": f"mobile ({url})"}
