"""Items from JSON Lines: one ``{"id", "tags", "data"}`` object a line, checked line by line."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import msgspec

from trawl.cli.common import utf8
from trawl.model.errors import InvalidInput
from trawl.model.ids import check_tag
from trawl.model.itemjson import Defaults, item_from_json
from trawl.model.records import NewItem

_decoder = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class BadLine:
    number: int
    reason: str


def parse_tag_option(text: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME=VALUE`` (split at the first ``=``)."""
    name, sep, value = text.partition("=")
    return check_tag(name), (utf8(value, f"value of tag {name!r}") if sep else None)


def parse_line(raw: bytes, defaults: Defaults) -> NewItem:
    try:
        value = _decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        raise InvalidInput(f"not valid JSON: {error}") from None
    # JSON text cannot hold a raw NUL: only the escape puts one in a string.
    return item_from_json(value, defaults, nul_free=b"\\u0000" not in raw)


def scan(lines: Iterable[bytes], defaults: Defaults) -> Iterator[NewItem | BadLine]:
    """Every non-blank line as an item or as the reason it is bad, numbered from 1."""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield parse_line(raw, defaults)
        except InvalidInput as error:
            yield BadLine(number, str(error))


@dataclass(frozen=True, slots=True)
class Source:
    """A file's lines, read once, and its size in bytes (None: not known, as for stdin)."""

    lines: Iterator[bytes]
    size: int | None


@contextlib.contextmanager
def line_source(path: str) -> Iterator[Source]:
    """The lines of *path*; ``-`` is stdin."""
    if path == "-":
        yield Source(iter(sys.stdin.buffer), None)
        return
    with open(path, "rb") as file:
        yield Source(iter(file), os.path.getsize(path))
