"""Checking a finished crawl: its WARC files' records, and its depths against a ground truth."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from warcio.archiveiterator import ArchiveIterator


def warc_records(paths: Iterable[str]) -> Counter[str]:
    """Record types in WARC files, read back with warcio (which also checks digests)."""
    counts: Counter[str] = Counter()
    for path in paths:
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream, check_digests=True):
                counts[record.rec_type] += 1
                record.content_stream().read()
    return counts


@dataclass(kw_only=True, slots=True)
class DepthReport:
    """Fetched pages against the true depths: what was right, wrong, missed and extra."""

    right: int = 0
    wrong: list[tuple[str, int, int]] = field(default_factory=list)  # url, stored, true
    missed: list[str] = field(default_factory=list)  # within the limit, never fetched
    beyond: list[str] = field(default_factory=list)  # fetched though past the limit

    @property
    def ok(self) -> bool:
        return not (self.wrong or self.missed or self.beyond)


def depth_report(
    pages: Iterable[dict[str, Any]], truth: dict[str, int], limit: int, excluded: set[str]
) -> DepthReport:
    """*pages* as ``crawl pages --json`` lists them; *excluded*: true pages not to expect
    (disallowed by robots.txt, rejected by a rule)."""
    report = DepthReport()
    fetched = {p["url"]: p for p in pages if p["state"] in ("DONE", "FAILED")}
    for url, page in fetched.items():
        true = truth.get(url)
        if true is None or true > limit:
            report.beyond.append(url)
        elif page["depth"] != true:
            report.wrong.append((url, page["depth"], true))
        else:
            report.right += 1
    for url, depth in truth.items():
        if depth <= limit and url not in fetched and url not in excluded:
            report.missed.append(url)
    return report
