"""bench/crawl's summary: the ratios it is read for, from rows run in rounds."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "crawl_summary.py"
_spec = importlib.util.spec_from_file_location("crawl_summary", _PATH)
assert _spec is not None
assert _spec.loader is not None
summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(summary)


def _row(system: str, round_: int, rate: float, size: int = 20000) -> dict[str, Any]:
    return {
        "system": system,
        "site_pages": size,
        "round": round_,
        "pages_per_s": rate,
        "cpu_ms_per_page": 1000 / rate,
    }


def _ratios(result: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["system"], r["against"]): r for r in result[0]["ratios"]}


def test_a_ratio_is_the_median_of_its_rounds_ratios_not_of_the_medians() -> None:
    # wget's slow second round slows trawl too: the rounds' ratios agree, the medians'
    # ratio does not.
    rows = [
        _row("trawl-sqlite", 0, 1000),
        _row("wget", 0, 2000),
        _row("wget", 1, 1000),
        _row("trawl-sqlite", 1, 520),
        _row("trawl-sqlite", 2, 1100),
        _row("wget", 2, 2000),
    ]
    ratio = _ratios(summary.summarize(rows))["trawl-sqlite", "wget"]
    assert ratio["rounds"] == [0.5, 0.52, 0.55]
    assert ratio["ratio"] == 0.52  # the medians' ratio would be 1000 / 2000
    assert ratio["target"] == 0.5


def test_each_system_gets_its_median_and_range_over_the_rounds() -> None:
    rows = [_row("wget", n, rate) for n, rate in enumerate((2000, 1500, 2900))]
    (wget,) = summary.summarize(rows)[0]["systems"]
    assert (wget["pages_per_s"], wget["min"], wget["max"], wget["rounds"]) == (
        2000,
        1500,
        2900,
        3,
    )
    assert wget["cpu_ms_per_page"] == 0.5


def test_a_postgresql_row_carries_its_servers_cpu_a_page() -> None:
    rows = [
        {**_row("trawl-postgresql", 0, 700), "db_cpu_ms_per_page": 0.5},
        {**_row("trawl-postgresql", 1, 650), "db_cpu_ms_per_page": 0.7},
        _row("wget", 0, 1800),
    ]
    systems = {s["system"]: s for s in summary.summarize(rows)[0]["systems"]}
    assert systems["trawl-postgresql"]["db_cpu_ms_per_page"] == pytest.approx(0.6)
    assert "db_cpu_ms_per_page" not in systems["wget"]
    text = "\n".join(summary.lines(summary.summarize(rows)))
    assert "+  0.60 in PostgreSQL" in text


def test_by_cpu_a_ratio_counts_the_servers_cpu_and_is_the_other_way_round() -> None:
    # 1.0 + 0.5 ms a page against wget's 0.5: a third of wget's efficiency.
    rows = [
        {**_row("trawl-sqlite", 0, 1000), "cpu_ms_per_page": 1.0, "db_cpu_ms_per_page": 0.5},
        {**_row("wget", 0, 2000), "cpu_ms_per_page": 0.5},
    ]
    ratio = _ratios(summary.summarize(rows))["trawl-sqlite", "wget"]
    assert ratio["cpu_ratio"] == pytest.approx(1 / 3)
    assert "by CPU 0.33x" in "\n".join(summary.lines(summary.summarize(rows)))


def test_a_system_named_twice_counts_once_a_round_by_its_median() -> None:
    rows = [
        _row("trawl-postgresql", 0, 900),
        _row("trawl-postgresql", 0, 1000),
        _row("trawl-postgresql-x2", 0, 1900),
    ]
    ratio = _ratios(summary.summarize(rows))["trawl-postgresql-x2", "trawl-postgresql"]
    assert ratio["rounds"] == [2.0]


def test_a_before_row_is_compared_with_its_own_system() -> None:
    rows = [
        _row("trawl-sqlite@before", 0, 1000),
        _row("trawl-sqlite", 0, 1100),
        _row("trawl-sqlite", 1, 1200),
        _row("trawl-sqlite@before", 1, 1000),
    ]
    ratio = _ratios(summary.summarize(rows))["trawl-sqlite", "trawl-sqlite@before"]
    assert ratio["ratio"] == pytest.approx(1.15)
    assert ratio["target"] is None


def test_without_a_shared_round_the_ratio_is_of_the_medians() -> None:
    rows = [_row("trawl-postgresql", 0, 600), _row("scrapy", 1, 300)]
    ratio = _ratios(summary.summarize(rows))["trawl-postgresql", "scrapy"]
    assert (ratio["ratio"], ratio["rounds"]) == (2.0, [])


def test_pairs_missing_a_side_and_sizes_stay_apart() -> None:
    rows = [_row("trawl-sqlite", 0, 1000, size=2000), _row("wget", 0, 2000, size=20000)]
    result = summary.summarize(rows)
    assert [s["site_pages"] for s in result] == [2000, 20000]
    assert all(s["ratios"] == [] for s in result)


def test_the_printed_summary_says_whether_each_target_is_met() -> None:
    rows = [
        _row("trawl-sqlite", 0, 1000),
        _row("wget", 0, 2100),
        _row("scrapy", 0, 300),
    ]
    text = "\n".join(summary.lines(summary.summarize(rows)))
    assert "trawl-sqlite / wget" in text
    assert "0.48x" in text
    assert "target >= 0.5x: NOT met" in text
    assert "target >= 2.0x: met" in text
