"""The ratios bench/crawl is read for, from its rows run in rounds.

A crawl row lasts seconds and the machine's other work moves it: wget alone moved from
2,056 to 2,899 pages/s in one run of six rows (2026-11-29). So `bench/crawl --rounds N`
runs every system once a round, the order reversed every other round, and a ratio is the
median of its rounds' ratios: a slow minute slows both sides of the round it falls in.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

# The targets, each a row's pages/s over another's in the same run.
TARGETS: tuple[tuple[str, str, float], ...] = (
    ("trawl-sqlite", "wget", 0.5),
    ("trawl-sqlite", "scrapy", 2.0),
    ("trawl-postgresql", "scrapy", 1.0),
    ("trawl-postgresql-x2", "trawl-postgresql", 1.6),
)


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per site size: each system's median pages/s and CPU a page over its rounds (and its
    PostgreSQL server's CPU a page, where measured), then the targets' ratios and each
    ``NAME`` over ``NAME@before`` where both ran."""
    out: list[dict[str, Any]] = []
    for size in unique(row["site_pages"] for row in rows):
        sized = [row for row in rows if row["site_pages"] == size]
        rates = _by_round(sized, "pages_per_s")
        cpu = _by_round(sized, "cpu_ms_per_page")
        db = _by_round([row for row in sized if "db_cpu_ms_per_page" in row], "db_cpu_ms_per_page")
        systems = [
            {
                "system": system,
                "pages_per_s": statistics.median(per.values()),
                "min": min(per.values()),
                "max": max(per.values()),
                "cpu_ms_per_page": statistics.median(cpu[system].values()),
                **(
                    {"db_cpu_ms_per_page": statistics.median(db[system].values())}
                    if system in db
                    else {}
                ),
                "rounds": len(per),
            }
            for system, per in rates.items()
        ]
        # All the CPU a page cost: the command's, and its PostgreSQL server's.
        costs = _by_round(
            [
                {**row, "all": row["cpu_ms_per_page"] + row.get("db_cpu_ms_per_page", 0.0)}
                for row in sized
            ],
            "all",
        )
        ratios = [
            _ratio(rates, costs, system, against, target)
            for system, against, target in _pairs(list(rates))
            if system in rates and against in rates
        ]
        out.append({"site_pages": size, "systems": systems, "ratios": ratios})
    return out


def lines(summary: list[dict[str, Any]]) -> list[str]:
    text: list[str] = []
    for size in summary:
        rounds = max(s["rounds"] for s in size["systems"])
        text.append(f"== site {size['site_pages']}, {rounds} round(s): medians")
        for s in size["systems"]:
            text.append(
                f"{s['system']:<27} {s['pages_per_s']:8.1f} pages/s"
                f" ({s['min']:.1f}-{s['max']:.1f})  {s['cpu_ms_per_page']:5.2f} CPU ms/page"
                + (
                    f" + {s['db_cpu_ms_per_page']:5.2f} in PostgreSQL"
                    if "db_cpu_ms_per_page" in s
                    else ""
                )
            )
        for r in size["ratios"]:
            name = f"{r['system']} / {r['against']}"
            spread = f"rounds {min(r['rounds']):.2f}-{max(r['rounds']):.2f}" if r["rounds"] else ""
            verdict = ""
            if r["target"] is not None:
                met = "met" if r["ratio"] >= r["target"] else "NOT met"
                verdict = f"  target >= {r['target']}x: {met}"
            text.append(
                f"{name:<50} {r['ratio']:5.2f}x  {spread}  by CPU {r['cpu_ratio']:.2f}x{verdict}"
            )
    return text


def _pairs(systems: list[str]) -> list[tuple[str, str, float | None]]:
    pairs: list[tuple[str, str, float | None]] = list(TARGETS)
    pairs += [(s.partition("@")[0], s, None) for s in systems if s.endswith("@before")]
    return pairs


def _by_round(rows: list[dict[str, Any]], key: str) -> dict[str, dict[int, float]]:
    """system -> round -> the median of its rows' *key* in that round (a system named
    twice in --only runs twice a round)."""
    values: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        values.setdefault(row["system"], {}).setdefault(row["round"], []).append(row[key])
    return {
        system: {n: statistics.median(v) for n, v in per.items()} for system, per in values.items()
    }


def _ratio(
    rates: dict[str, dict[int, float]],
    costs: dict[str, dict[int, float]],
    system: str,
    against: str,
    target: float | None,
) -> dict[str, Any]:
    """*system*'s pages/s over *against*'s, and by CPU: *against*'s CPU a page over
    *system*'s (above 1, *system* spends less), the figure other work moves least."""
    ratio, rounds = median_ratio(rates[system], rates[against])
    by_cpu, _ = median_ratio(costs[against], costs[system])
    return {
        "system": system,
        "against": against,
        "ratio": ratio,
        "rounds": rounds,
        "cpu_ratio": by_cpu,
        "target": target,
    }


def median_ratio(mine: dict[int, float], theirs: dict[int, float]) -> tuple[float, list[float]]:
    """The median of the rounds' ratios, and those ratios; with no round shared, the ratio
    of the medians."""
    rounds = [mine[n] / theirs[n] for n in sorted(mine) if theirs.get(n)]
    if rounds:
        return statistics.median(rounds), rounds
    whole = statistics.median(theirs.values())
    return (statistics.median(mine.values()) / whole if whole else 0.0), rounds


def unique(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))
