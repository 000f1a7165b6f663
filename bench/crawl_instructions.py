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
from the self cost callgrind records per function.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
    (the median of each size's runs where it ran more than once), in all and by object;
    then each ``NAME`` over ``NAME@before``."""
    out: list[dict[str, Any]] = []
    for system in _unique(row["system"] for row in rows):
        mine = [row for row in rows if row["system"] == system]
        sizes = sorted({row["site_pages"] for row in mine})
        if len(sizes) < 2:
            continue
        small = _median_row([r for r in mine if r["site_pages"] == sizes[0]])
        large = _median_row([r for r in mine if r["site_pages"] == sizes[-1]])
        pages = large["pages"] - small["pages"]
        if pages <= 0:
            continue
        objects = set(small["objects"]) | set(large["objects"])
        per_object = {
            name: (large["objects"].get(name, 0) - small["objects"].get(name, 0)) / pages
            for name in objects
        }
        out.append(
            {
                "system": system,
                "sizes": [sizes[0], sizes[-1]],
                "pages": [small["pages"], large["pages"]],
                "instructions_per_page": (large["instructions"] - small["instructions"]) / pages,
                "objects": dict(sorted(per_object.items(), key=lambda kv: -kv[1])),
            }
        )
    found = {entry["system"]: entry for entry in out}
    for entry in out:
        before = found.get(f"{entry['system']}@before")
        if before is not None:
            entry["vs_before"] = entry["instructions_per_page"] / before["instructions_per_page"]
    return out


def lines(summary: list[dict[str, Any]]) -> list[str]:
    text = ["== instructions a page (callgrind; the slope between two site sizes)"]
    for entry in summary:
        small, large = entry["sizes"]
        head = (
            f"{entry['system']:<28} {entry['instructions_per_page']:>12,.0f} a page"
            f"  (sites {small} and {large})"
        )
        if "vs_before" in entry:
            head += f"  {entry['vs_before']:.3f}x @before"
        text.append(head)
        shown = list(entry["objects"].items())[:SHOWN_OBJECTS]
        text += [f"    {name:<40} {count:>12,.0f}" for name, count in shown]
    return text


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median total (the lower middle one of an even count)."""
    ordered = sorted(rows, key=lambda row: row["instructions"])
    return ordered[(len(ordered) - 1) // 2]


def _unique(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))
