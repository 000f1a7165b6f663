"""WARC/1.1 output through warcio: one gzip member per record, rotation by size, a
``warcinfo`` record at the head of each file, and revisit records for repeated payloads."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

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
    truncated: bool = False  # the body was cut at the crawl's max_bytes (WARC-Truncated)


def digest_of(sha1: hashlib._Hash) -> str:
    """A WARC payload digest from a SHA-1 fed as the bytes arrived."""
    # A page takes four of these. base64.b32encode is a Python loop made for any length;
    # a SHA-1 is 160 bits, sixteen 10-bit pairs of base32 letters: 2.4 -> 1.6 us a digest.
    n = int.from_bytes(sha1.digest())
    pair = _B32_PAIRS
    return "sha1:" + "".join([pair[(n >> shift) & 1023] for shift in _B32_SHIFTS])


_B32_PAIRS = [
    a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
]
_B32_SHIFTS = tuple(range(150, -10, -10))


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
        file = self._open()
        offset = file.tell()
        try:
            response_id = _record_id()
            _response(file, exchange, refers_to, response_id)
            length = file.tell() - offset
            _request(file, exchange, response_id)
            if outlinks:
                _metadata(file, exchange, outlinks)
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
            self._file = None

    def write_resource(self, url: str, content_type: str, data: bytes, date: str) -> Written:
        """A ``resource`` record (a page's screenshot) for *url*, as one unit like
        :meth:`write`."""
        file = self._open()
        offset = file.tell()
        try:
            fields = [
                ("WARC-Record-ID", _record_id()),
                ("WARC-Target-URI", url),
                ("WARC-Payload-Digest", _sha1(data)),
            ]
            _write(file, "resource", date, fields, content_type, [data])
            file.flush()
        except BaseException:
            self._cut(file, offset)
            raise
        length = file.tell() - offset
        self._end = file.tell()
        written = Written(file=self.name, offset=offset, length=length, revisit=False)
        self._rotate(file)
        return written

    def _open(self) -> _Sink:
        if self._file is not None:
            return self._file
        file, name = _exclusive(self.base)
        fields = {"software": f"trawl/{trawl.__version__}", "format": "WARC File Format 1.1"}
        try:
            _warcinfo(file, Path(name).name, fields | self.info)
            file.flush()
        except BaseException:  # no room even for the header: leave no torn file behind
            file.abandon()
            Path(name).unlink(missing_ok=True)
            raise
        self._file, self.name = file, name
        self._end = self._synced = 0
        return file

    def _rotate(self, file: _Sink) -> None:
        if file.tell() >= self.max_size:
            self.close()

    def close(self) -> None:
        """Sync and close the current file (rotation, shutdown); the next write opens a new
        one."""
        with self._sync_lock:
            if self._file is not None:
                self._file.close()
            self._file = None
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


# -- records -------------------------------------------------------------------------------
# Each record is one gzip member: a WARC/1.1 header block, the record's block, two CRLFs.
# Written here rather than through warcio's writer, which cost a crawl more than a tenth
# of its CPU (header objects, a digest pass per record, gzip at level 9); warcio still
# reads and checks what is written (tests, `trawl demo`).

LEVEL = 6  # gzip level: 9 made big bodies slow for a few per cent of size
CHUNK = 1 << 16
WHOLE = 1 << 18  # a record whose block is at most this is compressed in one piece
MIN_WBITS = 9  # zlib's smallest window (512 bytes) for a gzip member
_HTTP_RESPONSE = "application/http; msgtype=response"
_HTTP_REQUEST = "application/http; msgtype=request"
_FIELDS = "application/warc-fields"
_REVISIT = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

Part = bytes | IO[bytes]  # a stream is read from its start, in chunks
_EMPTY = digest_of(hashlib.sha1())  # of a GET's request body


def _record_id() -> str:
    # uuid.uuid4() without the UUID object, which cost more than the random bytes (a page
    # takes three of these): version 4, RFC 4122 variant.
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    x = raw.hex()
    return f"<urn:uuid:{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}>"


def _sha1(*parts: Part) -> str:
    digest = hashlib.sha1()
    for part in parts:
        for chunk in _chunks(part):
            digest.update(chunk)
    return digest_of(digest)


def _http_head(first_line: str, headers: list[tuple[str, str]]) -> bytes:
    """The HTTP message head as it went over the wire (names and values came in as
    latin-1, so they go back as the same bytes)."""
    lines = [first_line, *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")


def _response(file: _Sink, ex: Exchange, refers_to: tuple[str, str] | None, record_id: str) -> None:
    head = _http_head(f"{ex.protocol} {ex.status_line}", ex.response_headers)
    fields = [("WARC-Record-ID", record_id), ("WARC-Target-URI", ex.url)]
    if ex.ip:
        fields.append(("WARC-IP-Address", ex.ip))
    if refers_to is not None:  # the payload was archived before: its headers only
        fields += [
            ("WARC-Profile", _REVISIT),
            ("WARC-Refers-To-Target-URI", refers_to[0]),
            ("WARC-Refers-To-Date", refers_to[1]),
            ("WARC-Payload-Digest", ex.digest),
        ]
        _write(file, "revisit", ex.date, fields, _HTTP_RESPONSE, [head])
        return
    fields.append(("WARC-Payload-Digest", ex.digest))
    if ex.truncated:
        fields.append(("WARC-Truncated", "length"))
    _write(file, "response", ex.date, fields, _HTTP_RESPONSE, [head, ex.body])


def _request(file: _Sink, ex: Exchange, concurrent_to: str) -> None:
    fields = [
        ("WARC-Record-ID", _record_id()),
        ("WARC-Target-URI", ex.url),
        ("WARC-Concurrent-To", concurrent_to),
        ("WARC-Payload-Digest", _sha1(ex.request_body) if ex.request_body else _EMPTY),
    ]
    head = _http_head(ex.request_line, ex.request_headers)
    _write(file, "request", ex.date, fields, _HTTP_REQUEST, [head, ex.request_body])


def _metadata(file: _Sink, ex: Exchange, outlinks: list[str]) -> None:
    """``outlink: URL`` lines for the exchange's URL."""
    body = "".join(f"outlink: {url}\r\n" for url in outlinks).encode()
    digest = _sha1(body)  # the block is the payload
    fields = [
        ("WARC-Record-ID", _record_id()),
        ("WARC-Target-URI", ex.url),
        ("WARC-Payload-Digest", digest),
    ]
    _write(file, "metadata", ex.date, fields, _FIELDS, [body], digest)


def _warcinfo(file: _Sink, filename: str, info: dict[str, str]) -> None:
    body = "".join(f"{name}: {value}\r\n" for name, value in info.items()).encode()
    fields = [("WARC-Record-ID", _record_id()), ("WARC-Filename", filename)]
    _write(file, "warcinfo", warc_date(time.time()), fields, _FIELDS, [body])


def _write(
    file: _Sink,
    kind: str,
    date: str,
    fields: list[tuple[str, str]],
    content_type: str,
    block: list[Part],
    digest: str | None = None,
) -> None:
    """One record, one gzip member: its header (with the block's *digest*, computed here
    unless given, and length), the block, and the two CRLFs that end a record."""
    size = sum(_size(part) for part in block)
    whole = b"".join(c for part in block for c in _chunks(part)) if size <= WHOLE else None
    if digest is None:
        digest = _sha1(whole) if whole is not None else _sha1(*block)
    header = [
        "WARC/1.1",
        f"WARC-Type: {kind}",
        f"WARC-Date: {date}",
        *(f"{name}: {value}" for name, value in fields),
        f"WARC-Block-Digest: {digest}",
        f"Content-Type: {content_type}",
        f"Content-Length: {size}",
    ]
    head = ("\r\n".join(header) + "\r\n\r\n").encode()
    gzip = _gzip(len(head) + size + 4)
    if whole is not None:
        # One call into zlib rather than one a part (each drops and retakes the GIL, which
        # the event loop's other threads wait on): a page's records took 4 % less CPU.
        file.write(gzip.compress(b"".join((head, whole, b"\r\n\r\n"))) + gzip.flush())
        return
    file.write(gzip.compress(head))
    for part in block:
        for chunk in _chunks(part):
            file.write(gzip.compress(chunk))
    file.write(gzip.compress(b"\r\n\r\n") + gzip.flush())


def _gzip(size: int) -> zlib._Compress:
    """A gzip compressor for a member of *size* bytes.

    By default zlib sets up a 32 KiB window and about 256 KiB of tables whatever the input:
    most records (a request, a page's outlinks, a small page) are a few hundred bytes and a
    page writes three. In timeit, setting up and compressing one of 300-1,500 bytes took
    73-83 us against 8-17 us with a window no larger than the member and tables to match,
    for the same output size (in a loop of page writes the gain was smaller: the allocator
    kept some of the memory). Any reader inflates it: the window only bounds how far back
    a match reaches."""
    bits = min(zlib.MAX_WBITS, max(MIN_WBITS, (size - 1).bit_length()))
    return zlib.compressobj(LEVEL, zlib.DEFLATED, bits + 16, max(1, bits - 7))


def _chunks(part: Part) -> Iterator[bytes]:
    if isinstance(part, bytes):
        if part:
            yield part
        return
    part.seek(0)
    while chunk := part.read(CHUNK):
        yield chunk
    part.seek(0)


def _size(part: Part) -> int:
    if isinstance(part, bytes):
        return len(part)
    return part.seek(0, os.SEEK_END)
