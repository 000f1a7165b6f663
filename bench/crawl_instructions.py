"""Instructions a crawled page costs, counted by callgrind: `bench/crawl --instructions`.

A timed crawl row moves by a tenth or more with the machine's other work, and so does its
CPU a page, so a change worth a few per cent cannot be seen in it. Valgrind's callgrind
counts the instructions the crawler's process runs (every thread, user space only: system
calls and page faults are not counted), which the machine's load does not change. Two runs
of the same code still differ a little (about 0.7 % on the 2,000-page site): how many pages
a claim or a commit carries depends on timing, and under valgrind the crawler runs some
fifty times slower than the site it crawls. And instructions are not time: an instruction
repeated by a ``rep`` prefix counts once a repetition, so a memset that glibc does with
``rep stosb`` counts about one instruction a byte (zlib's set-up of a 32 KiB window
showed as 65,000), and a cache miss counts as one.

Each system crawls two sizes of the demo site, and a page's cost is the slope between
them, ``(I(large) - I(small)) / (pages(large) - pages(small))``: start-up (imports, the
schema) and the site's fixed pages (one 5 MB binary) cost both crawls the same and drop
out. The same slope is given for each shared object (the interpreter, SQLite, zlib...),
from the self cost callgrind records per function. With ``--rounds N`` each round gives
its slope, a system's figure is the median of them, and ``NAME@before`` is compared by
the median of the rounds' ratios.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from crawl_summary import median_ratio, unique

# Only trawl on SQLite does all its work in the process callgrind counts; a PostgreSQL
# crawler's database work is the server's.
SYSTEMS = ("trawl-sqlite", "trawl-sqlite-nosync")
DEFAULT_SIZES = "500,2000"
SHOWN_OBJECTS = 6  # the objects listed a system, the costliest first


def command(out: Path) -> list[str]:
    """The valgrind prefix for a crawler whose counts go to *out*."""
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--trace-children=no"]


def by_object(path: Path) -> dict[str, int]:
    """Instructions (self cost, every thread) by shared object's file name, from a
    callgrind output file: cost lines count towards the ``ob=`` in force, except the line
    after ``calls=``, which is a call's inclusive cost (already counted in its callee)."""
    names: dict[str, str] = {}
    totals: dict[str, int] = defaultdict(int)
    current = "?"
    after_call = False
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("ob="):
            current = _name(line[3:], names)
        elif line.startswith("calls="):
            after_call = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            if after_call:
                after_call = False
                continue
            fields = line.split()
            if len(fields) >= 2:
                totals[current] += int(fields[1])
        elif line.startswith("cob="):
            # A call's target object: named here if first seen (compressed names are
            # defined on first use), without changing whose self cost comes next.
            _name(line[4:], names)
    return dict(totals)


_COMPRESSED = re.compile(r"\((\d+)\)(?: (.*))?")


def _name(text: str, names: dict[str, str]) -> str:
    """An object's file name from ``(id) /path``, ``(id)`` (defined before) or ``/path``."""
    found = _COMPRESSED.fullmatch(text.strip())
    if found is None:
        return Path(text.strip()).name
    key, path = found.groups()
    if path is not None:
        names[key] = Path(path).name
    return names.get(key, f"({key})")


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per system: instructions a page, the slope between its smallest and largest site
    in each round, in all and by object, and the median over the rounds (with the range
    of the rounds' slopes); then each ``NAME`` over ``NAME@before`` as bench/crawl's timed
    summary takes a ratio (crawl_summary.median_ratio): the median of the rounds' ratios,
    or with no round shared the ratio of the medians."""
    out: list[dict[str, Any]] = []
    slopes_of: dict[str, dict[int, float]] = {}
    for system in unique(row["system"] for row in rows):
        mine = [row for row in rows if row["system"] == system]
        sizes = sorted({row["site_pages"] for row in mine})
        if len(sizes) < 2:
            continue
        small = {r["round"]: r for r in mine if r["site_pages"] == sizes[0]}
        large = {r["round"]: r for r in mine if r["site_pages"] == sizes[-1]}
        slopes: dict[int, float] = {}
        objects: dict[str, list[float]] = defaultdict(list)
        for n in sorted(set(small) & set(large)):
            pages = large[n]["pages"] - small[n]["pages"]
            if pages <= 0:
                continue  # a crawl that stopped early: no slope
            slopes[n] = (large[n]["instructions"] - small[n]["instructions"]) / pages
            for name in set(small[n]["objects"]) | set(large[n]["objects"]):
                grown = large[n]["objects"].get(name, 0) - small[n]["objects"].get(name, 0)
                objects[name].append(grown / pages)
        if not slopes:
            continue
        slopes_of[system] = slopes
        per_object = {name: statistics.median(values) for name, values in objects.items()}
        out.append(
            {
                "system": system,
                "sizes": [sizes[0], sizes[-1]],
                "instructions_per_page": statistics.median(slopes.values()),
                "min": min(slopes.values()),
                "max": max(slopes.values()),
                "rounds": len(slopes),
                "objects": dict(sorted(per_object.items(), key=lambda kv: -kv[1])),
            }
        )
    for entry in out:
        before = slopes_of.get(f"{entry['system']}@before")
        if before is None:
            continue
        ratio, rounds = median_ratio(slopes_of[entry["system"]], before)
        entry["vs_before"], entry["vs_before_rounds"] = ratio, rounds
    return out


def lines(summary: list[dict[str, Any]]) -> list[str]:
    text = ["== instructions a page (callgrind; the slope between two site sizes)"]
    for entry in summary:
        small, large = entry["sizes"]
        head = (
            f"{entry['system']:<28} {entry['instructions_per_page']:>12,.0f} a page"
            f" ({entry['min']:,.0f}-{entry['max']:,.0f}, {entry['rounds']} round(s);"
            f" sites {small} and {large})"
        )
        if "vs_before" in entry:
            head += f"  {entry['vs_before']:.3f}x @before"
            if spread := entry["vs_before_rounds"]:
                head += f" (rounds {min(spread):.3f}-{max(spread):.3f})"
        text.append(head)
        shown = list(entry["objects"].items())[:SHOWN_OBJECTS]
        text += [f"    {name:<40} {count:>12,.0f}" for name, count in shown]
    return text
