"""trawl.model.itemjson: the tag forms of an item line, and their checks."""

from __future__ import annotations

import pytest

from trawl.model import itemjson
from trawl.model.errors import InvalidInput


@pytest.mark.parametrize(
    ("value", "tags"),
    [
        (None, ()),
        (["a", "b"], (("a", None), ("b", None))),
        (["a", ["lang", "fr"]], (("a", None), ("lang", "fr"))),
        ({"a": None, "lang": "fr"}, (("a", None), ("lang", "fr"))),
        ([], ()),
    ],
)
def test_every_tag_form(value: object, tags: itemjson.Tags) -> None:
    assert itemjson.tags_from_json(value) == tags


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (["ok", ""], "tag name must be a non-empty string"),
        (["ok", "a\x00b"], "control characters"),
        (["ok", 3], r"each tag must be a name or a \[name, value\] pair"),
        ([["ok", 3]], "a tag value must be a string or null"),
        ("ok", '"tags" must be a list or an object'),
    ],
)
def test_a_bad_tag_is_named_after_good_ones_were_seen(value: object, reason: str) -> None:
    itemjson.tags_from_json(["ok"])  # "ok" is a name seen and checked before
    with pytest.raises(InvalidInput, match=reason):
        itemjson.tags_from_json(value)


def test_the_names_seen_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(itemjson, "_TAGS_SEEN", set())
    monkeypatch.setattr(itemjson, "_LISTS_SEEN", {})
    monkeypatch.setattr(itemjson, "_TAGS_SEEN_MAX", 3)
    for n in range(10):
        assert itemjson.tags_from_json([f"t{n}"]) == ((f"t{n}", None),)
        assert itemjson.tags_from_json([f"t{n}"]) == ((f"t{n}", None),)  # as seen
    assert len(itemjson._TAGS_SEEN) <= 3
    assert len(itemjson._LISTS_SEEN) <= 3
    with pytest.raises(InvalidInput):
        itemjson.tags_from_json(["t9", ""])


def test_an_item_with_one_tag_keeps_it_and_a_tag_named_twice_is_kept_once() -> None:
    one = itemjson.item_from_json({"id": "a", "tags": ["x"]})
    assert one.tags == (("x", None),)
    twice = itemjson.item_from_json({"id": "a", "tags": [["x", "1"], ["x", "2"]]})
    assert twice.tags == (("x", "2"),)


@pytest.mark.parametrize(
    ("value", "tags"),
    [
        (["a", "b"], (("a", None), ("b", None))),  # the list seen, found again
        (["b", "a"], (("b", None), ("a", None))),  # the same names in another order
        (["a"], (("a", None),)),
        (["a", ["b", "x"]], (("a", None), ("b", "x"))),  # a pair: no list of names
        (["a", {"b": "x"}], None),  # an object in the list: not a tag
        (["a", "b", 3], None),  # the names seen, and one that is not a name
        (["a", "b", ""], None),
    ],
)
def test_a_list_of_names_seen_before_is_found_only_when_all_its_entries_are_names(
    value: object, tags: itemjson.Tags | None
) -> None:
    assert itemjson.tags_from_json(["a", "b"]) == (("a", None), ("b", None))
    if tags is None:
        with pytest.raises(InvalidInput):
            itemjson.tags_from_json(value)
    else:
        assert itemjson.tags_from_json(value) == tags
