"""A claim's room split between the visit policies' pools by their weights."""

from __future__ import annotations

import pytest

from trawl.engine.policy import shares


@pytest.mark.parametrize(
    ("weights", "room", "expected"),
    [
        ((40.0, 40.0, 20.0), 1000, [400, 400, 200]),
        ((40.0, 40.0, 20.0), 5, [2, 2, 1]),
        ((1.0, 1.0, 1.0), 10, [4, 3, 3]),
        ((0.0, 1.0, 0.0), 7, [0, 7, 0]),
    ],
)
def test_shares_add_up_to_the_room(
    weights: tuple[float, float, float], room: int, expected: list[int]
) -> None:
    assert shares(weights, room) == expected
