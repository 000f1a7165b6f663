"""How HotPath hands out the results of a synced pipeline (store/hotpath.py)."""

from __future__ import annotations

from typing import Any

import pytest

from trawl.store.hotpath import _collect


class _Cursor:
    """A cursor after ``executemany(returning=True)``: one result set a parameter row."""

    description = (("n",),)

    def __init__(self, results: list[list[Any]]) -> None:
        self._results, self._at = results, 0

    def fetchall(self) -> list[Any]:
        return self._results[self._at]

    def nextset(self) -> bool | None:
        self._at += 1
        return True if self._at < len(self._results) else None


def test_each_rows_result_goes_to_its_own_list_in_order() -> None:
    into: list[list[Any]] = [[], [], []]
    _collect(_Cursor([[(1,)], [], [(3,), (4,)]]), into, many=True)
    assert into == [[(1,)], [], [(3,), (4,)]]


def test_fewer_results_than_rows_is_an_error_not_a_row_left_empty() -> None:
    """A row the server never answered must not pass for one that returned nothing: the
    batch fails with what went wrong (the gate's batcher then asks one by one)."""
    into: list[list[Any]] = [[], [], []]
    with pytest.raises(RuntimeError, match="executemany returned 2 results for 3 rows"):
        _collect(_Cursor([[(1,)], [(2,)]]), into, many=True)


def test_a_single_statements_rows_extend_its_list() -> None:
    into: list[Any] = []
    _collect(_Cursor([[(1,), (2,)]]), into, many=False)
    assert into == [(1,), (2,)]
