"""WARC/1.1 output through warcio: one gzip member per record, rotation by size, a
``warcinfo`` record at the head of each file, and revisit records for repeated payloads."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
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
    request_body: bytes = b""  # what a POST (from a browser page) sent


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
        self._file: _Sink | None = None
        self._writer: WARCWriter | None = None
        self.name = ""
        self._end = 0  # bytes written to the current file
        self._synced = 0  # bytes of the current file known to be on disk
        self._sync_lock = threading.Lock()

    def write(
        self,
        exchange: Exchange,
        refers_to: tuple[str, str] | None,
        outlinks: list[str] | None = None,
    ) -> Written:
        """A response (a revisit if *refers_to* names the first capture of the same
        payload: (url, date)), its request, and a ``metadata`` record of its outlinks, as
        one unit: all of them are in the file, or the file is cut back to where they
        began. Returns where the response went; :meth:`sync` makes it durable."""
        writer, file = self._open()
        offset = file.tell()
        try:
            response = self._response(writer, exchange, refers_to)
            request = self._request(writer, exchange, response)
            writer.write_record(response)
            length = file.tell() - offset
            writer.write_record(request)
            if outlinks:
                writer.write_record(self._metadata(writer, exchange, outlinks))
            file.flush()
        except BaseException:
            self._cut(file, offset)
            raise
        written = Written(file=self.name, offset=offset, length=length, revisit=bool(refers_to))
        self._end = file.tell()
        self._rotate(file)
        return written

    def sync(self, written: Written) -> None:
        """Make *written* durable (fdatasync), sharing one sync among the writers that wait
        together: call it outside the write lock."""
        with self._sync_lock:
            if written.file != self.name or self._synced >= written.offset + written.length:
                return  # synced already, or its file was synced and closed on rotation
            file, end = self._file, self._end
            if file is not None:
                os.fdatasync(file.fileno())
                self._synced = end

    def _cut(self, file: _Sink, offset: int) -> None:
        """Undo a record half written (a full disk, an I/O error): no reader may meet a torn
        gzip member. If even that fails, the file is given up and the next write starts a
        new one."""
        try:
            file.discard_to(offset)
        except OSError:
            file.abandon()
            self._file, self._writer = None, None

    def write_resource(self, url: str, content_type: str, data: bytes, date: str) -> Written:
        """A ``resource`` record (a page's screenshot) for *url*, as one unit like
        :meth:`write`."""
        writer, file = self._open()
        offset = file.tell()
        try:
            record = writer.create_warc_record(
                url,
                "resource",
                payload=_Bytes(data),
                length=len(data),
                warc_content_type=content_type,
                warc_headers_dict={"WARC-Date": date},
            )
            writer.write_record(record)
            file.flush()
        except BaseException:
            self._cut(file, offset)
            raise
        length = file.tell() - offset
        self._end = file.tell()
        written = Written(file=self.name, offset=offset, length=length, revisit=False)
        self._rotate(file)
        return written

    @staticmethod
    def _request(writer: WARCWriter, exchange: Exchange, response: Any) -> Any:
        request = writer.create_warc_record(
            exchange.url,
            "request",
            payload=_Bytes(exchange.request_body),
            http_headers=StatusAndHeaders(
                exchange.request_line, exchange.request_headers, is_http_request=True
            ),
            warc_headers_dict={"WARC-Date": exchange.date},
        )
        request.rec_headers.add_header("WARC-Concurrent-To", _record_id(response))
        return request

    @staticmethod
    def _metadata(writer: WARCWriter, exchange: Exchange, outlinks: list[str]) -> Any:
        """A ``metadata`` record of ``outlink: URL`` lines for the exchange's URL."""
        body = "".join(f"outlink: {url}\r\n" for url in outlinks).encode()
        return writer.create_warc_record(
            exchange.url,
            "metadata",
            payload=_Bytes(body),
            warc_content_type="application/warc-fields",
            warc_headers_dict={"WARC-Date": exchange.date},
        )

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

    def _open(self) -> tuple[WARCWriter, _Sink]:
        if self._writer is not None and self._file is not None:
            return self._writer, self._file
        file, name = _exclusive(self.base)
        writer = WARCWriter(file, gzip=True, warc_version="1.1")
        fields = {"software": f"trawl/{trawl.__version__}", "format": "WARC File Format 1.1"}
        try:
            writer.write_record(writer.create_warcinfo_record(Path(name).name, fields | self.info))
            file.flush()
        except BaseException:  # no room even for the header: leave no torn file behind
            file.abandon()
            Path(name).unlink(missing_ok=True)
            raise
        self._file, self._writer, self.name = file, writer, name
        self._end = self._synced = 0
        return writer, file

    def _rotate(self, file: _Sink) -> None:
        if file.tell() >= self.max_size:
            self.close()

    def close(self) -> None:
        """Sync and close the current file (rotation, shutdown); the next write opens a new
        one."""
        with self._sync_lock:
            if self._file is not None:
                self._file.close()
            self._file, self._writer = None, None
            self._end = self._synced = 0


class _Sink:
    """An append-only WARC file whose write buffer this module owns, so the bytes of a
    unit that failed are dropped, never flushed later over the cut; writes are retried
    until complete (a short write is not silently lost)."""

    BUFFER = 1 << 16

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._pos = os.lseek(fd, 0, os.SEEK_END)

    def write(self, data: bytes) -> int:
        self._buffer += data
        if len(self._buffer) >= self.BUFFER:
            self.flush()
        return len(data)

    def flush(self) -> None:
        view = memoryview(self._buffer)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
                self._pos += written
        finally:
            view.release()
        self._buffer.clear()

    def tell(self) -> int:
        return self._pos + len(self._buffer)

    def fileno(self) -> int:
        return self.fd

    def discard_to(self, offset: int) -> None:
        self._buffer.clear()
        os.ftruncate(self.fd, offset)
        self._pos = os.lseek(self.fd, offset, os.SEEK_SET)

    def close(self) -> None:
        try:
            self.flush()
            os.fdatasync(self.fd)
        finally:
            os.close(self.fd)

    def abandon(self) -> None:
        self._buffer.clear()
        os.close(self.fd)


def _exclusive(base: str) -> tuple[_Sink, str]:
    stem = base.removesuffix(".gz").removesuffix(".warc")
    Path(stem).parent.mkdir(parents=True, exist_ok=True)
    for n in range(100_000):
        name = f"{stem}.warc.gz" if n == 0 else f"{stem}-{n:05d}.warc.gz"
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        _sync_directory(Path(name).parent)  # the new name survives a crash too
        return _Sink(fd), name
    raise RuntimeError(f"no free WARC file name next to {base}")


def _sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _record_id(record: Any) -> str:
    return str(record.rec_headers.get_header("WARC-Record-ID"))


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self._pos + size
        chunk = self._data[self._pos : end]
        self._pos += len(chunk)
        return chunk
