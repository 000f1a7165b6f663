"""The WARC a crawl writes is valid for warcio, points back from every attempt, and stores a
repeated payload once, as revisit records for the later copies."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import re
import subprocess
import sys
import zlib
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.support import site_crawl
from tests.support.crawl_rows import crawl_row
from trawl.crawl import state, warc
from trawl.crawl.client import Response
from trawl.crawl.options import Options
from trawl.crawl.outcomes import Fetched
from trawl.crawl.warc import Exchange
from trawl.demo.httpd import SiteServer
from trawl.demo.site import generate


@pytest.mark.parametrize("remembered", [state.RECENT_PAYLOADS, 1])
def test_warc_is_valid_and_repeated_payloads_are_revisits(
    tmp_path: Path, sqlite_url: str, remembered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # remembered=1: the process forgets first copies at once and finds them in the crawl's
    # committed payloads instead, as it does for most of a large crawl.
    monkeypatch.setattr(state, "RECENT_PAYLOADS", remembered)
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


class _Committed:
    """A port whose crawl has committed one payload, sha1:OLD; counts the lookups."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def payload(self, ctx: object, crawl_id: int, digest: str) -> tuple[str, str] | None:
        self.asked.append(digest)
        return ("http://a.test/old", "2026-11-01T00:00:00Z") if digest == "sha1:OLD" else None

    async def close(self) -> None:
        pass


def _response(url: str, digest: str) -> Response:
    body = io.BytesIO(b"<html>same</html>")
    exchange = Exchange(
        url=url,
        request_line="GET / HTTP/1.1",
        request_headers=[],
        status_line="200 OK",
        protocol="HTTP/1.1",
        response_headers=[("Content-Type", "text/html")],
        body=body,
        digest=digest,
        date="2026-11-25T00:00:00Z",
    )
    return Response(
        exchange=exchange,
        status=200,
        headers={},
        size=17,
        truncated=False,
        started=0.0,
        elapsed=0.0,
    )


def test_first_copies_come_from_the_crawls_committed_payloads_past_recent_ones(
    tmp_path: Path,
) -> None:
    port = _Committed()
    rt = state.ProcessState(port=port)  # type: ignore[arg-type]
    options = Options(warc=str(tmp_path / "x.warc.gz"))
    crawl = crawl_row(1, options.to_json(), seeds=[])

    async def main() -> list[tuple[bool, bool]]:
        out = []
        for url, digest in [
            ("http://a.test/1", "sha1:OLD"),  # committed before: a revisit
            ("http://a.test/2", "sha1:NEW"),  # new: stored in full
            ("http://a.test/3", "sha1:NEW"),  # its twin, not yet committed: a revisit
        ]:
            written, first = await rt.archive(None, crawl, _response(url, digest))  # type: ignore[arg-type]
            out.append((written.revisit, first))
        await rt.close()
        return out

    assert asyncio.run(main()) == [(True, False), (False, True), (True, False)]
    assert port.asked == ["sha1:OLD", "sha1:NEW"]  # the twin was known in-process


@pytest.mark.parametrize("sync", [True, False])
def test_records_are_on_disk_before_the_commit_that_records_them(
    tmp_path: Path, sqlite_url: str, sync: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What each WARC file held on disk (fdatasync'd), and what each committed attempt's
    # record needs: at the moment its outcome is applied in the commit transaction.
    synced: dict[str, int] = {}
    late: list[str] = []
    real_sync = os.fdatasync

    def fdatasync(fd: int) -> None:
        real_sync(fd)
        name = os.readlink(f"/proc/self/fd/{fd}")
        synced[name] = max(synced.get(name, 0), os.fstat(fd).st_size)

    real_apply = Fetched.apply_many.__func__  # type: ignore[attr-defined]

    def apply_many(cls: type, store: object, now: float, task: str, effects: list[Fetched]) -> None:
        for e in effects:
            r = e.record
            if r["warc_file"] and synced.get(os.path.abspath(r["warc_file"]), 0) < (
                r["warc_offset"] + r["warc_length"]
            ):
                late.append(r["url"])
        real_apply(cls, store, now, task, effects)

    monkeypatch.setattr(warc.os, "fdatasync", fdatasync)
    monkeypatch.setattr(Fetched, "apply_many", classmethod(apply_many))
    with SiteServer(generate(60)) as server:
        options = Options(warc=str(tmp_path / "site.warc.gz"), timeout=5.0, warc_sync=sync)
        crawl_id = site_crawl.create(sqlite_url, server, depth=3, options=options)
        site_crawl.run(sqlite_url, crawl_id)
    recorded = [a for a in site_crawl.attempts(sqlite_url, crawl_id) if a["warc_file"]]
    assert len(recorded) > 40
    if sync:
        assert late == [], "committed before its record was on disk"
    else:
        assert late, "--no-warc-sync commits without waiting for the disk"


def _exchange(
    path: str, body: bytes, response_headers: list[tuple[str, str]], **changes: Any
) -> Exchange:
    """A GET of ``http://h.test<path>`` answered 200 with *body*."""
    return Exchange(
        url=f"http://h.test{path}",
        request_line=f"GET {path} HTTP/1.1",
        request_headers=[("Host", "h.test")],
        status_line="200 OK",
        protocol="HTTP/1.1",
        response_headers=response_headers,
        body=io.BytesIO(body),
        digest=warc.digest_of(hashlib.sha1(body)),
        date="2026-11-25T00:00:00.000000Z",
        **changes,
    )


def _warcio_check(path: Path) -> None:
    """warcio's own reading of the file: every record's framing and digests."""
    checked = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_records_keep_the_exchange_as_it_went_over_the_wire(tmp_path: Path) -> None:
    files = warc.WarcFiles(str(tmp_path / "x.warc.gz"), info={"isPartOf": "test"})
    raw_header = "caf\xe9"  # a latin-1 byte in a header value, as aiohttp hands it over
    cut = _exchange(
        "/big", b"x" * 100, [("Content-Length", "10000"), ("X-Name", raw_header)], truncated=True
    )
    first = files.write(cut, None, ["http://h.test/a"])
    again = files.write(
        replace(cut, url="http://h.test/again", body=io.BytesIO(b"x" * 100)),
        ("http://h.test/big", cut.date),
    )
    files.close()
    _warcio_check(tmp_path / "x.warc.gz")
    with (tmp_path / "x.warc.gz").open("rb") as stream:
        stream.seek(first.offset)
        response = next(iter(ArchiveIterator(stream)))
        assert response.rec_headers.get_header("WARC-Truncated") == "length"
        assert response.http_headers.get_header("X-Name") == raw_header
        assert response.content_stream().read() == b"x" * 100
        stream.seek(again.offset)
        revisit = next(iter(ArchiveIterator(stream)))
    assert revisit.rec_type == "revisit"
    digests = [v for k, v in revisit.rec_headers.headers if k == "WARC-Payload-Digest"]
    assert digests == [cut.digest], "one payload digest, the original's"
    assert revisit.rec_headers.get_header("WARC-Refers-To-Target-URI") == "http://h.test/big"


@pytest.mark.parametrize(
    "size",
    [0, 1, 200, 511, 512, 513, 4095, 40_000, 1 << 15, warc.WHOLE - 1, warc.WHOLE, warc.WHOLE + 1],
)
def test_records_of_any_size_are_whole_gzip_members_with_right_digests(
    tmp_path: Path, size: int
) -> None:
    """Small records are compressed in one call with a window sized to them, big ones
    streamed with the full window: every record must read back byte for byte, its member
    must inflate on its own, and its digests must match its bytes."""
    body = os.urandom(size // 2) + b"<a href=x>" * ((size - size // 2) // 10)
    body += b"y" * (size - len(body))
    files = warc.WarcFiles(str(tmp_path / "x.warc.gz"), info={})
    exchange = _exchange("/p", body, [("Content-Length", str(size))])
    written = files.write(exchange, None, [f"http://h.test/{n}" for n in range(size // 100)])
    files.close()
    _warcio_check(tmp_path / "x.warc.gz")
    data = (tmp_path / "x.warc.gz").read_bytes()
    member = data[written.offset : written.offset + written.length]
    inflated = zlib.decompress(member, zlib.MAX_WBITS + 16)  # this one member, alone
    assert inflated.endswith(b"\r\n\r\n" + body + b"\r\n\r\n")
    with (tmp_path / "x.warc.gz").open("rb") as stream:
        stream.seek(written.offset)
        record = next(iter(ArchiveIterator(stream)))
        assert record.rec_type == "response"
        assert record.content_stream().read() == body
    ids = [line for line in inflated.split(b"\r\n") if line.startswith(b"WARC-Record-ID")]
    uuid4 = rb"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
    assert re.fullmatch(rb"WARC-Record-ID: <urn:uuid:" + uuid4 + rb">", ids[0])
