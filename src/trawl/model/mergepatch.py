"""JSON merge patch (RFC 7396): a patch object says the new value of each key it names;
``null`` removes the key; nested objects merge the same way; anything else replaces."""

from __future__ import annotations

from typing import Any


def apply(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = apply(merged.get(key), value)
    return merged


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns *old* into *new*: what the journal says an update changed.
    (A key set to JSON null reads as removed: merge patch cannot say "set to null".)"""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if before == value and type(before) is type(value):
            continue
        if isinstance(before, dict) and isinstance(value, dict):
            patch[key] = diff(before, value)
        else:
            patch[key] = value
    return patch


_MISSING = object()
