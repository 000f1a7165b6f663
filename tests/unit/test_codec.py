import pytest

from trawl.model.errors import InvalidData
from trawl.store import codec


def test_round_trips_json() -> None:
    value = {"a": [1, 2.5, None, True], "b": {"c": "é"}}
    assert codec.loads(codec.dumps(value)) == value


def test_not_serialisable_is_invalid_data() -> None:
    with pytest.raises(InvalidData, match="not JSON-serialisable"):
        codec.dumps({"when": object()})


@pytest.mark.parametrize(("text", "said"), [("[1]", "JSON object"), ("{", "not valid JSON")])
def test_parse_object_names_the_input(text: str, said: str) -> None:
    with pytest.raises(InvalidData, match=f"--data .*{said}"):
        codec.parse_object(text, "--data")


def test_object_keys_must_be_strings() -> None:
    with pytest.raises(InvalidData, match="key that is not a string"):
        codec.object_or_error({1: "x"}, "data")
