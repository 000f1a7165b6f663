"""WARC/1.1 output through warcio: one gzip member per record, rotation by size, a
``warcinfo`` record at the head of each file, and revisit records for repeated payloads."""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

import trawl

DEFAULT_MAX_SIZE = 1_000_000_000  # start a new file past about 1 GB


@dataclass(frozen=True, kw_only=True, slots=True)
class Written:
    """Where a response (or revisit) record went."""

    file: str
    offset: int
    length: int
    revisit: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Exchange:
    """One HTTP request and its response, as they went over the wire."""

    url: str
    request_line: str
    request_headers: list[tuple[str, str]]
    status_line: str
    protocol: str
    response_headers: list[tuple[str, str]]
    body: IO[bytes]  # the payload as received (still content-encoded), at position 0
    digest: str  # of the payload: sha1:BASE32
    date: str  # WARC-Date of the exchange
    ip: str | None = None


def digest_of(sha1: hashlib._Hash) -> str:
    """A WARC payload digest from a SHA-1 fed as the bytes arrived."""
    return "sha1:" + base64.b32encode(sha1.digest()).decode()


def warc_date(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


class WarcFiles:
    """Appends records to ``PATH`` (``x.warc.gz``), then ``x-00001.warc.gz``... Each process
    takes a name nobody has (O_EXCL), so several workers never share a file."""

    def __init__(
        self, path: str, *, max_size: int = DEFAULT_MAX_SIZE, info: dict[str, str]
    ) -> None:
        self.base = path
        self.max_size = max_size
        self.info = info
        self._file: IO[bytes] | None = None
        self._writer: WARCWriter | None = None
        self.name = ""

    def write(self, exchange: Exchange, refers_to: tuple[str, str] | None) -> Written:
        """A request and a response record (a revisit if *refers_to* names the first
        capture of the same payload: (url, date)); returns where the response went."""
        writer, file = self._open()
        request = writer.create_warc_record(
            exchange.url,
            "request",
            payload=_Empty(),
            http_headers=StatusAndHeaders(
                exchange.request_line, exchange.request_headers, is_http_request=True
            ),
            warc_headers_dict={"WARC-Date": exchange.date},
        )
        response = self._response(writer, exchange, refers_to)
        request.rec_headers.add_header("WARC-Concurrent-To", _record_id(response))
        offset = file.tell()
        writer.write_record(response)
        length = file.tell() - offset
        writer.write_record(request)
        file.flush()
        written = Written(file=self.name, offset=offset, length=length, revisit=bool(refers_to))
        return written

    def metadata(self, url: str, date: str, fields: list[tuple[str, str]]) -> None:
        """A ``metadata`` record of ``name: value`` lines (outlinks, via) for *url*."""
        writer, file = self._open()
        body = "".join(f"{name}: {value}\r\n" for name, value in fields).encode()
        record = writer.create_warc_record(
            url,
            "metadata",
            payload=_Bytes(body),
            warc_content_type="application/warc-fields",
            warc_headers_dict={"WARC-Date": date},
        )
        writer.write_record(record)
        file.flush()
        self._rotate(file)

    def _response(self, writer: WARCWriter, ex: Exchange, refers_to: tuple[str, str] | None) -> Any:
        http = StatusAndHeaders(ex.status_line, ex.response_headers, protocol=ex.protocol)
        headers = {"WARC-Date": ex.date, "WARC-Payload-Digest": ex.digest}
        if ex.ip:
            headers["WARC-IP-Address"] = ex.ip
        if refers_to is not None:
            return writer.create_revisit_record(
                ex.url,
                ex.digest,
                refers_to[0],
                refers_to[1],
                http_headers=http,
                warc_headers_dict=headers,
            )
        return writer.create_warc_record(
            ex.url, "response", payload=ex.body, http_headers=http, warc_headers_dict=headers
        )

    def _open(self) -> tuple[WARCWriter, IO[bytes]]:
        if self._writer is not None and self._file is not None:
            return self._writer, self._file
        self._file, self.name = _exclusive(self.base)
        self._writer = WARCWriter(self._file, gzip=True, warc_version="1.1")
        fields = {"software": f"trawl/{trawl.__version__}", "format": "WARC File Format 1.1"}
        self._writer.write_record(
            self._writer.create_warcinfo_record(Path(self.name).name, fields | self.info)
        )
        return self._writer, self._file

    def _rotate(self, file: IO[bytes]) -> None:
        if file.tell() >= self.max_size:
            self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file, self._writer = None, None


def _exclusive(base: str) -> tuple[IO[bytes], str]:
    stem = base.removesuffix(".gz").removesuffix(".warc")
    Path(stem).parent.mkdir(parents=True, exist_ok=True)
    for n in range(100_000):
        name = f"{stem}.warc.gz" if n == 0 else f"{stem}-{n:05d}.warc.gz"
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        return os.fdopen(fd, "wb"), name
    raise RuntimeError(f"no free WARC file name next to {base}")


def _record_id(record: Any) -> str:
    return str(record.rec_headers.get_header("WARC-Record-ID"))


class _Empty:
    def read(self, size: int = -1) -> bytes:
        return b""


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self._pos + size
        chunk = self._data[self._pos : end]
        self._pos += len(chunk)
        return chunk
