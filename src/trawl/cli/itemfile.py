"""Items from JSON Lines: one ``{"id", "tags", "data"}`` object a line, checked line by line."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from trawl.cli.common import utf8
from trawl.model.errors import InvalidInput
from trawl.model.ids import check_id, check_json, check_tag, check_text
from trawl.model.records import NewItem

Tags = tuple[tuple[str, str | None], ...]
Lines = Callable[[], Iterator[bytes]]

KEYS = frozenset({"id", "tags", "data", "niceness"})

_decoder = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class BadLine:
    number: int
    reason: str


@dataclass(frozen=True, slots=True)
class Defaults:
    """What the command line adds to every item of a file."""

    tags: Tags = ()
    niceness: int | None = None


def parse_tag_option(text: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME=VALUE`` (split at the first ``=``)."""
    name, sep, value = text.partition("=")
    return check_tag(name), (utf8(value, f"value of tag {name!r}") if sep else None)


def tags_from_json(value: Any) -> Tags:
    """A list of names or ``[name, value]`` pairs, or an object ``{name: value}``."""
    if value is None:
        return ()
    if isinstance(value, dict):
        pairs: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list):
        pairs = [_tag_pair(entry) for entry in value]
    else:
        raise InvalidInput(f'"tags" must be a list or an object, got {_kind(value)}')
    return tuple((check_tag(name), _tag_value(name, v)) for name, v in pairs)


def _tag_pair(entry: Any) -> tuple[Any, Any]:
    if isinstance(entry, str):
        return entry, None
    if isinstance(entry, list) and len(entry) == 2:
        return entry[0], entry[1]
    raise InvalidInput(f"each tag must be a name or a [name, value] pair, got {entry!r}")


def _tag_value(name: Any, value: Any) -> str | None:
    if value is None:
        return value
    if isinstance(value, str):
        return check_text(value, f"the value of tag {name!r}")
    raise InvalidInput(f"tag {name!r} has value {value!r}: a tag value must be a string or null")


def item_from_json(value: Any, defaults: Defaults) -> NewItem:
    """The item one decoded line describes, or InvalidInput saying what is wrong with it."""
    if not isinstance(value, dict):
        raise InvalidInput(f'expected a JSON object like {{"id": "..."}}, got {_kind(value)}')
    unknown = sorted(set(value) - KEYS)
    if unknown:
        raise InvalidInput(f"unknown key {unknown[0]!r} (allowed: data, id, niceness, tags)")
    if "id" not in value:
        raise InvalidInput('missing "id"')
    return NewItem(
        id=check_id(value["id"]),
        tags=_merge(tags_from_json(value.get("tags")), defaults.tags),
        data=_data(value.get("data")),
        niceness=_niceness(value.get("niceness", defaults.niceness)),
    )


def _merge(own: Tags, extra: Tags) -> Tags:
    return tuple({**dict(own), **dict(extra)}.items())


def _data(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f'"data" must be a JSON object, got {_kind(value)}')
    check_json(value, '"data"')
    return value


def _niceness(value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise InvalidInput(f'"niceness" must be an integer, got {value!r}')


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def parse_line(raw: bytes, defaults: Defaults) -> NewItem:
    try:
        value = _decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        raise InvalidInput(f"not valid JSON: {error}") from None
    return item_from_json(value, defaults)


def scan(lines: Iterable[bytes], defaults: Defaults) -> Iterator[NewItem | BadLine]:
    """Every non-blank line as an item or as the reason it is bad, numbered from 1."""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield parse_line(raw, defaults)
        except InvalidInput as error:
            yield BadLine(number, str(error))


def good_items(lines: Iterable[bytes], defaults: Defaults) -> Iterator[NewItem]:
    return (entry for entry in scan(lines, defaults) if isinstance(entry, NewItem))


def batches(items: Iterable[NewItem], size: int) -> Iterator[list[NewItem]]:
    batch: list[NewItem] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


@contextlib.contextmanager
def line_source(path: str) -> Iterator[Lines]:
    """A way to read the lines of *path* more than once; ``-`` is stdin, kept in a temp file."""
    if path != "-":
        yield lambda: _file_lines(path)
        return
    with tempfile.TemporaryFile() as spool:
        shutil.copyfileobj(sys.stdin.buffer, spool)

        def again() -> Iterator[bytes]:
            spool.seek(0)
            yield from spool

        yield again


def _file_lines(path: str) -> Iterator[bytes]:
    with open(path, "rb") as file:
        yield from file
