"""API token scopes, each allowing what the one before it allows: read < write < admin."""

from __future__ import annotations

from typing import Literal

from trawl.model.errors import InvalidInput

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")


def check_scope(text: str) -> Scope:
    for scope in SCOPES:
        if text == scope:
            return scope
    raise InvalidInput(f"scope {text!r} is not one of {', '.join(SCOPES)}")


def scope_allows(have: str, need: str) -> bool:
    """Whether a token of scope *have* may do what needs *need* (unknown scopes allow nothing)."""
    if have not in SCOPES or need not in SCOPES:
        return False
    return SCOPES.index(have) >= SCOPES.index(need)
