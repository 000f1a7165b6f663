"""Items described as JSON ``{"id", "tags", "data", "niceness"}``: checked field by field,
with errors that name what is wrong. ``trawl add --file`` and ``POST /items`` share these
rules, so an item one accepts the other accepts too."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trawl.model.errors import InvalidInput
from trawl.model.ids import check_id, check_json, check_tag, check_text
from trawl.model.records import NewItem

Tags = tuple[tuple[str, str | None], ...]

KEYS = frozenset({"id", "tags", "data", "niceness"})


@dataclass(frozen=True, slots=True)
class Defaults:
    """What the caller adds to every item (the command line's --tag and --niceness)."""

    tags: Tags = ()
    niceness: int | None = None


def tags_from_json(value: Any) -> Tags:
    """A list of names or ``[name, value]`` pairs, or an object ``{name: value}``."""
    if value is None:
        return ()
    if isinstance(value, dict):
        pairs: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list):
        names = tuple(value)
        try:  # a list of names seen before, checked then: the common form, by far
            known = _LISTS_SEEN.get(names)
        except TypeError:  # an entry is a list or an object: not one of them
            known = None
        if known is not None:
            return known
        if all(type(entry) is str for entry in value):  # names only
            return _seen_list(names, tuple([(_checked_tag(name), None) for name in value]))
        pairs = [_tag_pair(entry) for entry in value]
    else:
        raise InvalidInput(f'"tags" must be a list or an object, got {_kind(value)}')
    return tuple([(_checked_tag(name), _tag_value(name, v)) for name, v in pairs])


# A file of a million items names a handful of tags: each name is checked once, and each
# list of names once (a list's entries are compared, and a name never equals a non-name, so
# only a list all of whose names passed is found). Bounded, so a file of ever new names
# costs memory no more than the check costs time.
_TAGS_SEEN: set[str] = set()
_TAGS_SEEN_MAX = 10_000
_LISTS_SEEN: dict[tuple[str, ...], Tags] = {}


def _seen_list(names: tuple[str, ...], tags: Tags) -> Tags:
    if len(_LISTS_SEEN) >= _TAGS_SEEN_MAX:
        _LISTS_SEEN.clear()
    _LISTS_SEEN[names] = tags
    return tags


def _checked_tag(name: Any) -> str:
    if type(name) is str and name in _TAGS_SEEN:
        return name
    checked = check_tag(name)
    if len(_TAGS_SEEN) >= _TAGS_SEEN_MAX:
        _TAGS_SEEN.clear()
    _TAGS_SEEN.add(checked)
    return checked


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


def item_from_json(
    value: Any, defaults: Defaults = Defaults(), *, nul_free: bool = False
) -> NewItem:
    """The item one decoded line describes, or InvalidInput saying what is wrong with it.

    ``nul_free``: the caller saw no ``\\u0000`` escape in the JSON text, so no string in
    the data can hold a NUL and the walk looking for one is skipped."""
    if not isinstance(value, dict):
        raise InvalidInput(f'expected a JSON object like {{"id": "..."}}, got {_kind(value)}')
    if not KEYS.issuperset(value):
        unknown = sorted(set(value) - KEYS)
        raise InvalidInput(f"unknown key {unknown[0]!r} (allowed: data, id, niceness, tags)")
    if "id" not in value:
        raise InvalidInput('missing "id"')
    return NewItem(
        id=check_id(value["id"]),
        tags=_merge(tags_from_json(value.get("tags")), defaults.tags),
        data=_data(value.get("data"), nul_free),
        niceness=_niceness(value.get("niceness", defaults.niceness)),
    )


def _merge(own: Tags, extra: Tags) -> Tags:
    if not extra:
        if len(own) < 2:
            return own  # nothing named twice
        return tuple(dict(own).items())
    return tuple({**dict(own), **dict(extra)}.items())


def _data(value: Any, nul_free: bool) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f'"data" must be a JSON object, got {_kind(value)}')
    if not nul_free:
        check_json(value, '"data"')
    return value


MAX_NICENESS = 1_000_000  # stored as a 32-bit INTEGER; any real ordering fits well inside


def _niceness(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(f'"niceness" must be an integer, got {value!r}')
    if abs(value) > MAX_NICENESS:
        raise InvalidInput(f'"niceness" {value} is outside -{MAX_NICENESS}..{MAX_NICENESS}')
    return value


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")
