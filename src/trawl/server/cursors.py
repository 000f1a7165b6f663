"""Page cursors: the sort key of the last row a page showed, opaque to clients (base64url of
its JSON), so a listing's order can change without breaking the API."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

import msgspec
from litestar.params import Parameter

from trawl.model.errors import InvalidInput

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# Bounds on numbers a request may carry, so an out-of-range one is a 400 naming the field
# rather than an overflow in the database: ids and seqs fit a BIGINT, niceness an INTEGER.
MAX_ID = 2**62
MAX_NICENESS = 1_000_000
Id = Annotated[int, msgspec.Meta(ge=0, le=MAX_ID)]
Niceness = Annotated[int, msgspec.Meta(ge=-MAX_NICENESS, le=MAX_NICENESS)]
Depth = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
PathId = Annotated[int, Parameter(ge=0, le=MAX_ID)]


def encode(key: Any) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode(key)).decode().rstrip("=")


def decode(cursor: str | None, kind: type[Any]) -> Any:
    """The key *cursor* holds, checked to be a *kind* (a list for composite keys)."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return msgspec.json.decode(raw, type=kind)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise InvalidInput(
            f"cursor {cursor[:40]!r} is not one this server gave out: pass the 'next' value "
            "of the previous page unchanged"
        ) from None


def next_cursor(rows: list[Any], limit: int, key: Any) -> str | None:
    """A cursor after the last row when the page is full (there may be more), else None."""
    return encode(key(rows[-1])) if rows and len(rows) >= limit else None
