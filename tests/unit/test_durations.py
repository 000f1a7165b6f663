from datetime import timedelta

import pytest

from trawl.model.durations import format_seconds, optional_seconds, seconds
from trawl.model.errors import InvalidDuration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("7d", 604800.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5h", 5400.0),
        (" 2 W ", 1209600.0),
        ("90", 90.0),
        (45, 45.0),
        (0.5, 0.5),
        (timedelta(minutes=2), 120.0),
    ],
)
def test_parses_units_numbers_and_timedeltas(text: object, expected: float) -> None:
    assert seconds(text) == pytest.approx(expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "7x", "d7", "1h 30", "-5s", -1, True, None, "1h-2m"])
def test_rejects_what_it_cannot_read_and_says_how_to_write_it(bad: object) -> None:
    with pytest.raises(InvalidDuration) as error:
        seconds(bad)  # type: ignore[arg-type]
    assert "duration" in str(error.value)


def test_optional_passes_none_through() -> None:
    assert optional_seconds(None) is None
    assert optional_seconds("1m") == 60.0


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "-"), (0.25, "250ms"), (42, "42s"), (3600, "1h"), (90061, "1d1h"), (-120, "-2m")],
)
def test_formats_for_people(value: float | None, shown: str) -> None:
    assert format_seconds(value) == shown
