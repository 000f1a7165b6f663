"""HTTP fetching with aiohttp: the exchange exactly as it went over the wire (for the WARC),
with timeouts, a size cap, and gzip/deflate/brotli decoding for link extraction."""

from __future__ import annotations

import codecs
import hashlib
import re
import tempfile
import time
import zlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import IO

import aiohttp
import brotli
from aiohttp.connector import Connection

from trawl.crawl.urls import request_target
from trawl.crawl.warc import Exchange, digest_of, warc_date

CHUNK = 65536
SPOOL = 1 << 20  # bodies past 1 MiB wait on disk, not in memory
ACCEPT_ENCODING = "gzip, deflate, br"
DECODE_LIMIT = 20 << 20  # link extraction reads at most 20 MiB of decoded text


class FetchError(Exception):
    """The request got no complete response: a timeout, a reset, a refused connection."""


class HostHeldOff(FetchError):
    """The host asked to be left alone (a 429, or a 503 with Retry-After) after this
    request was planned, so it was not sent: not a failure of the host, nor of the page."""


class LateStart(Exception):
    """The request was about to go out later than its politeness permit allows, so it was
    not sent: sent now, it could land closer than the delay to the host's next request."""


@dataclass(kw_only=True, slots=True)
class Response:
    exchange: Exchange
    status: int
    headers: dict[str, str]  # lower-cased names, last value wins
    size: int
    truncated: bool
    started: float
    elapsed: float

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    def text(self) -> str:
        """The payload decoded (content-encoding, then charset), for link extraction."""
        body = self.exchange.body
        body.seek(0)
        raw = body.read(DECODE_LIMIT)
        body.seek(0)
        data = _decode(raw, (self.header("content-encoding") or "").lower())
        # The HTML standard's order: a byte order mark, then the header, then a meta tag.
        charset = _bom(data) or _charset(self.header("content-type") or "") or _meta(data)
        if charset is None:  # nothing declared: UTF-8 if it is, else as browsers guess
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError as error:
                # A body cut inside its last character is still UTF-8.
                cut = error.start >= len(data) - 3 and error.reason == "unexpected end of data"
                charset = "utf-8" if cut else "cp1252"
        try:
            return data.decode(charset, errors="replace")
        except UnicodeError:  # a codec that cannot replace what it cannot read (idna, ...)
            return data.decode("utf-8", errors="replace")

    def decoded(self) -> bytes:
        """The payload with its content-encoding undone, as a browser is handed it (an
        encoded payload is decoded up to DECODE_LIMIT)."""
        body = self.exchange.body
        body.seek(0)
        raw = body.read()
        body.seek(0)
        encoding = (self.header("content-encoding") or "").lower()
        return _decode(raw, encoding) if encoding else raw


# Waits for a new start on the request's host and returns the moment, on this machine's
# clock, by which the request must then go out (pacing.Starts).
Repace = Callable[[], Awaitable[float]]
# Waits, connected, for the request's start: a request begun early so that its connection is
# ready by then (crawl/setups.py). Raises HostHeldOff if the host asked to be left alone.
Ready = Callable[[], Awaitable[None]]
# Told how long the request took to get a connection, from fetch() to ready to send.
Setup = Callable[[float], None]


@dataclass(slots=True)
class _Paced:
    not_after: float  # the latest moment the request may go out (this machine's clock)
    repace: Repace | None  # how it gets a new start when its connection made it late
    ready: Ready | None
    setup: Setup | None
    began: float
    waited: float | None = None  # when *ready* let it go: the request's start, not began


# The permit of the request this task is making.
_PERMIT: ContextVar[_Paced | None] = ContextVar("trawl_permit", default=None)
# New starts a request whose connection made it late may take (each a round trip to the
# gate and a wait of about a delay) before it gives up with LateStart.
REPACES = 3


class _PacedRequest(aiohttp.ClientRequest):
    """A request that checks its politeness permit as it is sent: in ``send``, after
    connecting, with no suspension before aiohttp writes the request line and headers -
    the one place a late start can still be called off. A permit is checked here, not
    when the task wakes, because a new connection or a busy event loop can hold a request
    back long enough to crowd the host's next one. (A trace hook on headers-sent did the
    same, but tracing costs every request a dozen signal sends.)

    A request late by then takes a new start on its host and waits for it, keeping the
    connection it made: setting one up (DNS, TCP, TLS) takes a round trip or more to a
    distant host, often longer than a permit's margin, and aiohttp closes the connection
    of a request that fails in ``send``, so a request given up here would need a new
    connection next time, and be late again, for ever."""

    async def send(self, conn: Connection) -> aiohttp.ClientResponse:
        permit = _PERMIT.get()
        if permit is not None:
            if permit.setup is not None:
                permit.setup(time.time() - permit.began)
            if permit.ready is not None:
                await permit.ready()
                permit.waited = time.time()
            not_after, repace = permit.not_after, permit.repace
            tries = REPACES
            while repace is not None and tries and time.time() > not_after:
                tries -= 1
                not_after = await repace()
            if (late := time.time() - not_after) > 0:
                raise LateStart(f"{late:.3f}s past its permit")
        return await super().send(conn)


def session(concurrency: int) -> aiohttp.ClientSession:
    """One connection pool per process, keep-alive, no automatic decoding or redirects."""
    connector = aiohttp.TCPConnector(limit=max(1, concurrency) * 2, ttl_dns_cache=300)
    session = aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        request_class=_PacedRequest,
    )
    # aiohttp sends a GET again at once when a kept-alive connection drops under it: a
    # request the politeness gate never granted, landing milliseconds after the first. A
    # dropped request is a failed attempt, retried through the gate. (No public option;
    # test_remote_crawl's dropped connections fail if this stops working.)
    session._retry_connection = False
    return session


async def fetch(
    client: aiohttp.ClientSession,
    url: str,
    *,
    headers: dict[str, str],
    timeout: float,  # noqa: ASYNC109 - the request's own timeout, handed to aiohttp
    max_bytes: int,
    method: str = "GET",
    data: bytes | None = None,
    not_after: float | None = None,
    repace: Repace | None = None,
    ready: Ready | None = None,
    setup: Setup | None = None,
) -> Response:
    """GET (or *method*) *url* without following redirects; raises FetchError when no
    response came, and LateStart, having sent nothing, when the request could not go out
    by *not_after* (this machine's clock), nor by the new starts *repace* got it. With
    *ready*, the request, once connected, waits for it before it is sent; *setup* is told
    how long getting the connection took."""
    started = time.time()
    sent = {"Accept-Encoding": ACCEPT_ENCODING, **headers}
    limits = aiohttp.ClientTimeout(total=timeout, sock_connect=min(10.0, timeout))
    permit = None if not_after is None else _Paced(not_after, repace, ready, setup, started)
    paced = _PERMIT.set(permit)
    try:
        async with client.request(
            method,
            url,
            headers=sent,
            data=data,
            allow_redirects=False,
            timeout=limits,
            skip_auto_headers=(),
        ) as resp:
            ip = _peer(resp)
            body = await _read(resp, max_bytes)
            began = permit.waited if permit is not None and permit.waited else started
            return _response(url, resp, body, began, ip, data or b"")
    except TimeoutError as error:
        raise FetchError(f"timed out after {timeout:g}s") from error
    except aiohttp.ClientError as error:
        raise FetchError(f"{type(error).__name__}: {error}") from error
    except OSError as error:
        raise FetchError(f"{type(error).__name__}: {error}") from error
    finally:
        _PERMIT.reset(paced)


@dataclass(kw_only=True, slots=True)
class _Body:
    file: IO[bytes]
    size: int
    truncated: bool
    digest: str  # of the bytes kept, computed as they arrived


async def _read(resp: aiohttp.ClientResponse, max_bytes: int) -> _Body:
    file: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL)  # noqa: SIM115 - returned
    sha1 = hashlib.sha1()
    size, truncated = 0, False
    async for chunk in resp.content.iter_chunked(CHUNK):
        if size + len(chunk) > max_bytes:
            chunk, truncated = chunk[: max_bytes - size], True
        file.write(chunk)
        sha1.update(chunk)
        size += len(chunk)
        if truncated:
            break
    file.seek(0)
    return _Body(file=file, size=size, truncated=truncated, digest=digest_of(sha1))


def _response(
    url: str,
    resp: aiohttp.ClientResponse,
    body: _Body,
    started: float,
    ip: str | None,
    sent: bytes,
) -> Response:
    raw = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
    # The payload is stored de-chunked: say so rather than claim a chunked body.
    stored = [(k, v) for k, v in raw if k.lower() != "transfer-encoding"]
    protocol = f"HTTP/{resp.version.major}.{resp.version.minor}" if resp.version else "HTTP/1.1"
    request_headers = [(k, v) for k, v in resp.request_info.headers.items()]
    exchange = Exchange(
        url=url,
        request_line=f"{resp.method} {request_target(url)} {protocol}",
        request_headers=request_headers,
        request_body=sent,
        status_line=f"{resp.status} {resp.reason or ''}".strip(),
        protocol=protocol,
        response_headers=stored,
        body=body.file,
        digest=body.digest,
        date=warc_date(started),
        ip=ip,
        truncated=body.truncated,
    )
    return Response(
        exchange=exchange,
        status=resp.status,
        headers={k.lower(): v for k, v in raw},
        size=body.size,
        truncated=body.truncated,
        started=started,
        elapsed=time.time() - started,
    )


def _peer(resp: aiohttp.ClientResponse) -> str | None:
    connection = resp.connection
    if connection is None or connection.transport is None:
        return None
    peer = connection.transport.get_extra_info("peername")
    return str(peer[0]) if peer else None


def _decode(raw: bytes, encoding: str) -> bytes:
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, DECODE_LIMIT)
        if encoding == "deflate":
            try:
                return zlib.decompressobj().decompress(raw, DECODE_LIMIT)
            except zlib.error:
                return zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw, DECODE_LIMIT)
        if encoding == "br":
            # The output limit is what stops a bomb: brotli.decompress() has none. The buffer
            # stops growing once past the limit (so it may end up to twice the limit).
            out = brotli.Decompressor().process(raw, output_buffer_limit=DECODE_LIMIT)
            return bytes(out[:DECODE_LIMIT])
    except (zlib.error, brotli.error):
        return b""
    return raw


def _charset(content_type: str) -> str | None:
    """The charset a Content-Type names: UTF-8 for one Python cannot read, None for none."""
    for part in content_type.split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return _known(value.strip().strip("\"'")) or "utf-8"
    return None


def _known(charset: str) -> str | None:
    """*charset* if Python reads it as text. codecs.lookup, not b"".decode: that returns ""
    for an empty input without looking the name up, so a page naming an unknown charset
    failed its fetch. Python's bytes-to-bytes codecs (base64, zlib, rot13...) are not
    charsets."""
    try:
        return charset if getattr(codecs.lookup(charset), "_is_text_encoding", True) else None
    except LookupError:
        return None


# <meta charset="..."> or <meta http-equiv="Content-Type" content="...; charset=...">, in
# the first 1,024 bytes, as the HTML standard's prescan looks for it.
_META_CHARSET = re.compile(
    rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:\-]{1,40})", re.I
)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _bom(data: bytes) -> str | None:
    """The charset a byte order mark gives: it wins over the header, as in browsers (a
    server's default charset is often wrong for a file that says what it is)."""
    for bom, charset in _BOMS:
        if data.startswith(bom):
            return charset
    return None


def _meta(data: bytes) -> str | None:
    """The charset a meta tag in the first 1,024 bytes names. One naming UTF-16 is read as
    UTF-8, as the HTML standard's prescan says: the tag was found as ASCII bytes, so the
    page is not UTF-16 (that would have a byte order mark)."""
    found = _META_CHARSET.search(data, 0, 1024)
    if found is None:
        return None
    charset = _known(found.group(1).decode("ascii"))
    if charset is not None and codecs.lookup(charset).name.startswith("utf-16"):
        return "utf-8"
    return charset
