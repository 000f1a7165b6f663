"""The WARC a crawl writes is valid for warcio, points back from every attempt, and stores a
repeated payload once, as revisit records for the later copies."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from tests.support import site_crawl
from trawl.crawl.options import Options
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate


def test_warc_is_valid_and_repeated_payloads_are_revisits(tmp_path: Path, sqlite_url: str) -> None:
    warc = tmp_path / "out" / "site.warc.gz"
    with SiteServer(generate(120)) as server:
        options = Options(warc=str(warc), warc_size=200_000, timeout=5.0)
        crawl_id = site_crawl.create(sqlite_url, server, depth=3, options=options)
        site_crawl.run(sqlite_url, crawl_id)
        big = server.url(("aux", "/bin/big.bin"))
    files = sorted((tmp_path / "out").glob("*.warc.gz"))
    assert warc in files  # the first file has the name asked for; later ones a number
    assert len(files) > 1, "past --warc-size a new file is started"
    warcio = [sys.executable, "-m", "warcio.cli"]
    checked = subprocess.run([*warcio, "check", *map(str, files)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    index = subprocess.run([*warcio, "index", *map(str, files)], capture_output=True, text=True)
    assert index.returncode == 0, index.stderr

    records = _records(files)
    kinds = Counter(kind for kind, _, _ in records)
    assert kinds["warcinfo"] == len(files)
    assert kinds["request"] == kinds["response"] + kinds["revisit"]
    assert kinds["revisit"] >= 3, "session-id duplicates are stored as revisits"
    revisited = [target for kind, _, target in records if kind == "revisit"]
    assert all(target for target in revisited)  # WARC-Refers-To-Target-URI

    done = [a for a in site_crawl.attempts(sqlite_url, crawl_id) if a["warc_file"]]
    assert len(done) == kinds["response"] + kinds["revisit"] - _robots(records)
    for attempt in done:  # every attempt's offsets lead to its own record
        with open(attempt["warc_file"], "rb") as stream:
            stream.seek(attempt["warc_offset"])
            record = next(iter(ArchiveIterator(stream)))
            assert record.rec_headers.get_header("WARC-Target-URI") == attempt["url"]
            if attempt["url"] == big:
                assert len(record.content_stream().read()) == 5 << 20


def _records(files: list[Path]) -> list[tuple[str, str, str | None]]:
    out = []
    for path in files:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                uri = record.rec_headers.get_header("WARC-Target-URI") or ""
                target = record.rec_headers.get_header("WARC-Refers-To-Target-URI")
                out.append((record.rec_type, uri, target))
    return out


def _robots(records: list[tuple[str, str, str | None]]) -> int:
    return sum(1 for kind, uri, _ in records if kind != "request" and uri.endswith("robots.txt"))
