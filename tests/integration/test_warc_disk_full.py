"""A crawl whose WARC disk fills up mid-record: the WARC stays readable to its end, and every
page recorded DONE is in it at the offset its attempt gives."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.support import site_crawl
from trawl.crawl.options import Options
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1.5 MiB tmpfs: the demo site's WARC is several times that."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1536k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_leaves_a_readable_warc_holding_every_done_page(
    small_disk: Path, sqlite_url: str
) -> None:
    warc = small_disk / "site.warc.gz"
    with SiteServer(generate(150)) as server:
        options = Options(warc=str(warc), timeout=5.0)
        crawl_id = site_crawl.create(sqlite_url, server, depth=3, options=options)
        site_crawl.run(sqlite_url, crawl_id, lease=20.0)
    files = sorted(small_disk.glob("*.warc.gz"))
    assert files, "no WARC file at all"
    checked = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", *map(str, files)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for path in files:  # every gzip member whole, to the last byte
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                record.content_stream().read()

    pages = site_crawl.pages(sqlite_url, crawl_id)
    states = {p["state"] for p in pages.values()}
    assert "DONE" in states
    assert "FAILED" in states, "the disk filled up: later pages could not be archived"
    attempts = site_crawl.attempts(sqlite_url, crawl_id)
    archived = {a["url"]: a for a in attempts if a["warc_file"]}
    done = [url for url, p in pages.items() if p["state"] == "DONE"]
    for url in done:
        attempt = archived[url]
        with open(attempt["warc_file"], "rb") as stream:
            stream.seek(attempt["warc_offset"])
            record = next(iter(ArchiveIterator(stream)))
            assert record.rec_headers.get_header("WARC-Target-URI") == url
            record.content_stream().read()
