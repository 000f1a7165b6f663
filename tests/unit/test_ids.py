import pytest

from trawl.model.errors import InvalidItemId
from trawl.model.ids import MAX_ID_LENGTH, check_id, check_tag


def test_accepts_namespaced_ids_up_to_the_maximum() -> None:
    assert check_id("url:https://shop.example/p/1") == "url:https://shop.example/p/1"
    assert check_id("x" * MAX_ID_LENGTH) == "x" * MAX_ID_LENGTH


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("", "is empty"),
        ("x" * (MAX_ID_LENGTH + 1), f"maximum is {MAX_ID_LENGTH}"),
        ("sku:1\n", "control character"),
        ("a\x00b", "control character"),
        ("a\x7fb", "control character"),
        ("a\udcffb", "not valid UTF-8"),
        (123, "must be a string"),
    ],
)
def test_rejects_bad_ids_naming_the_problem(bad: object, said: str) -> None:
    with pytest.raises(InvalidItemId, match=said):
        check_id(bad)


def test_error_names_what_was_checked() -> None:
    with pytest.raises(InvalidItemId, match=r"^alias is empty"):
        check_id("", "alias")


@pytest.mark.parametrize("bad", ["", "t\tag", 3, "x" * 201, "t\udcffg", "t\x85g"])
def test_rejects_bad_tag_names(bad: object) -> None:
    with pytest.raises(InvalidItemId, match="tag name"):
        check_tag(bad)
