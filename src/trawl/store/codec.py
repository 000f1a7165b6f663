"""JSON in and out of the database: one encoder, fast (msgspec), strict on the way in."""

from __future__ import annotations

from typing import Any

import msgspec

from trawl.model.errors import InvalidData, InvalidItemId
from trawl.model.ids import check_json

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def dumps(value: Any) -> str:
    """Encode *value* as JSON text or raise InvalidData saying what could not be encoded."""
    try:
        return _encoder.encode(value).decode()
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise InvalidData(f"value is not JSON-serialisable: {exc}") from exc


def loads(text: str | bytes | None) -> Any:
    """Decode JSON text from the database (``None`` stays ``None``)."""
    return None if text is None else _decoder.decode(text)


def object_or_error(value: Any, what: str) -> dict[str, Any]:
    """Return *value* if it is a JSON object (a dict with string keys)."""
    if not isinstance(value, dict):
        raise InvalidData(f"{what} must be a JSON object, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise InvalidData(f"{what} has a key that is not a string: {key!r}")
    try:
        check_json(value, what)
    except InvalidItemId as error:
        raise InvalidData(str(error)) from None
    return value


def parse_object(text: str, what: str) -> dict[str, Any]:
    """Parse user-supplied JSON text that must hold an object."""
    try:
        value = _decoder.decode(text)
    except (msgspec.DecodeError, UnicodeError) as exc:
        raise InvalidData(f"{what} is not valid JSON: {exc}") from exc
    return object_or_error(value, what)
