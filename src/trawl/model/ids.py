"""Item ids: what is allowed, checked before anything is written."""

from __future__ import annotations

import re

from trawl.model.errors import InvalidItemId

#: Longest item id or alias accepted, in characters. Long enough for real URLs
#: (browsers cap near 2k-8k; crawlers see few past 2,000) while keeping index keys small.
MAX_ID_LENGTH = 2048

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Lone surrogates (undecodable bytes in a command-line argument) cannot be stored as UTF-8.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Either of the two: one scan tells the usual, clean value from one worth a closer look.
_SUSPECT = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def check_id(value: object, what: str = "item id") -> str:
    """Return *value* if it is a valid id, else raise InvalidItemId naming the problem."""
    if not isinstance(value, str):
        raise InvalidItemId(f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidItemId(f"{what} is empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidItemId(
            f"{what} is {len(value)} characters long; the maximum is {MAX_ID_LENGTH}: "
            f"{value[:60]!r}..."
        )
    if not _SUSPECT.search(value):
        return value
    bad = _CONTROL.search(value)
    if bad:
        raise InvalidItemId(
            f"{what} {value[:80]!r} contains control character {bad.group()!r} "
            f"at position {bad.start()}"
        )
    if _SURROGATE.search(value):
        raise InvalidItemId(f"{what} {value[:80]!r} is not valid UTF-8")
    return value


def check_tag(name: object) -> str:
    """Return *name* if it is a valid tag name."""
    if not isinstance(name, str) or not name:
        raise InvalidItemId(f"tag name must be a non-empty string, got {name!r}")
    if len(name) > 200 or _SUSPECT.search(name):
        raise InvalidItemId(
            f"tag name {name[:80]!r} is too long, has control characters or is not valid UTF-8"
        )
    return name


_PIPELINE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_pipeline_id(value: object) -> str:
    """A pipeline id: it names WARC files and live addresses, so letters, digits, ``.``,
    ``_`` and ``-`` only, at most 64, starting with a letter or digit."""
    if not isinstance(value, str) or not _PIPELINE_ID.fullmatch(value):
        raise InvalidItemId(
            f"pipeline id {str(value)[:80]!r}: use 1 to 64 letters, digits, '.', '_' or '-',"
            " starting with a letter or digit"
        )
    return value


def check_text(value: str, what: str) -> str:
    """Return *value* if it has no NUL: PostgreSQL cannot store one in text."""
    if "\x00" in value:
        raise InvalidItemId(f"{what} contains a NUL character at position {value.index(chr(0))}")
    return value


def check_json(value: object, what: str) -> None:
    """Raise naming the first string (key or value) in *value* that holds a NUL."""
    stack: list[tuple[object, str]] = [(value, what)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            check_text(node, where)
        elif isinstance(node, dict):
            for key, child in node.items():
                check_text(str(key), f"a key of {where}")
                stack.append((child, f"{where}.{key}"))
        elif isinstance(node, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(node))
