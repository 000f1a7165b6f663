"""The dashboard's small pure pieces: readable numbers, times and sizes, and charts whose
text a screen reader can read (and whose labels cannot inject markup)."""

from __future__ import annotations

from trawl.server.dashboard import charts
from trawl.server.dashboard.render import NONE, ago, number, size, span


def test_numbers_sizes_and_times_read_as_a_person_says_them() -> None:
    assert number(1234567) == "1,234,567"
    assert number(2.5) == "2.5"
    assert number(3.0) == "3"
    assert number(None) == NONE
    assert size(512) == "512 B"
    assert size(3 * 1024 * 1024) == "3.0 MiB"
    assert size(5 * 1024**4) == "5,120.0 GiB"
    assert span(0.25) == "250 ms"
    assert span(42) == "42 s"
    assert span(600) == "10 min"
    assert span(3 * 3600 + 300) == "3 h 5 min"
    assert span(3 * 86400) == "3 d"
    assert ago(100.0, now=160.0) == "60 s ago"
    assert ago(220.0, now=160.0) == "in 60 s"
    assert ago(None) == NONE


def test_a_sparkline_scales_to_its_maximum_and_is_labelled() -> None:
    svg = str(charts.sparkline([0.0, 5.0, 10.0], "jobs/s of <price>", width=100, height=20))
    assert 'role="img"' in svg
    assert 'aria-label="jobs/s of &lt;price&gt;"' in svg  # escaped, never markup
    assert "0.0,18.0 50.0,10.0 100.0,2.0" in svg
    assert "no data" in str(charts.sparkline([], "x"))
    assert "polyline" in str(charts.sparkline([0.0, 0.0], "idle"))  # no division by zero


def test_a_histogram_has_a_bar_and_a_text_per_depth() -> None:
    svg = str(charts.histogram([(0, 1), (1, 40), (2, 0)], "pages by depth"))
    assert svg.count("<rect") == 3
    assert "depth 1: 40 pages" in svg
    assert "pages by depth: depth 0: 1, depth 1: 40, depth 2: 0" in svg
    assert "no pages" in str(charts.histogram([], "pages by depth"))
