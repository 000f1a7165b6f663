"""Properties of the parsers of outside data, checked over generated input (hypothesis):
URL canonicalisation, durations and item files."""

from __future__ import annotations

import base64
import hashlib
import json
import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trawl.cli.itemfile import BadLine, scan
from trawl.crawl.urls import _canonical, canonical
from trawl.crawl.warc import digest_of
from trawl.model.durations import seconds
from trawl.model.errors import InvalidDuration
from trawl.model.itemjson import Defaults
from trawl.model.records import NewItem

# -- URL canonicalisation ------------------------------------------------------------------------

_HOST = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,10}(\.[A-Za-z]{2,5}){1,2}", fullmatch=True)
_PATH = st.lists(st.text(alphabet="abcXYZ019-._~%/", max_size=8), max_size=4).map("/".join)
_URL = st.builds(
    lambda scheme, host, port, path, query, fragment: (
        f"{scheme}://{host}{port}/{path}{query}{fragment}"
    ),
    st.sampled_from(["http", "https", "HTTP", "HtTpS"]),
    _HOST,
    st.sampled_from(["", ":80", ":443", ":8080"]),
    _PATH,
    st.sampled_from(["", "?a=1", "?b=2&a=1"]),
    st.sampled_from(["", "#x", "#"]),
)


@given(_URL)
def test_canonical_is_idempotent_and_drops_what_does_not_name_the_resource(url: str) -> None:
    once = canonical(url)
    assert once is not None
    assert canonical(once) == once
    assert "#" not in once
    scheme, _, rest = once.partition("://")
    assert scheme in ("http", "https")
    assert rest.split("/")[0] == rest.split("/")[0].lower()
    assert not rest.split("/")[0].endswith((":80", ":443")) or (
        (scheme, rest.split("/")[0][-4:]) not in (("http", ":80"), ("https", ":443"))
    )


@given(st.text(max_size=60))
def test_canonical_never_raises_on_arbitrary_text(text: str) -> None:
    result = canonical(text, "http://base.example/dir/")
    assert result is None or result.startswith(("http://", "https://"))


_LINK = st.builds(
    lambda prefix, host, port, path, end: f"{prefix}{host}{port}{path}{end}",
    st.sampled_from(["", "/", "//", "http://", "https://", "HTTP://", "http://u@", " /", "./"]),
    st.sampled_from(["", "a.example", "A.example", "127.0.0.1", "[::1]", "h-1.test", "a..b"]),
    st.sampled_from(["", ":80", ":443", ":8080", ":080", ":0", ":99999", ":65536", ":"]),
    st.text(alphabet="aZ09/.-_~%?=&:@!$'()*+,; \t\\é", max_size=16),
    st.sampled_from(["", "#", "#top", "#a b", "?", "?#x", "/..", "/.", " ", ";", ";x"]),
)
_BASE = st.sampled_from(
    [
        "http://base.example/",
        "http://base.example/dir/page?q=1",
        "https://b.example:8443/a/b",
        "http://127.0.0.1:41921/p/7",
    ]
)


@settings(max_examples=2000)
@given(_LINK, _BASE)
def test_the_fast_path_gives_what_the_full_parse_gives(link: str, base: str) -> None:
    # canonical() answers most links without urllib; _canonical is the full parse.
    assert canonical(link, base) == _canonical(link.strip(), base)
    assert canonical(link) == _canonical(link.strip(), None)


# -- durations ----------------------------------------------------------------------------------


@given(st.binary(max_size=200))
def test_a_payload_digest_is_the_base32_sha1_warc_readers_expect(data: bytes) -> None:
    expected = "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()
    assert digest_of(hashlib.sha1(data)) == expected


@given(st.floats(min_value=0, max_value=1e12, allow_nan=False))
def test_a_number_of_seconds_is_itself(value: float) -> None:
    assert seconds(value) == value
    assert seconds(repr(value)) == value


@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["w", "d", "h", "m", "s", "ms"])),
        min_size=1,
        max_size=6,
    )
)
def test_units_add_up(parts: list[tuple[int, str]]) -> None:
    size = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
    text = "".join(f"{n}{unit}" for n, unit in parts)
    assert math.isclose(seconds(text), sum(n * size[u] for n, u in parts), abs_tol=1e-6)


@pytest.mark.parametrize(
    "bad", ["nan", "inf", "-inf", "1e400", float("nan"), float("inf"), -1, "-5s", "5x", "", "s"]
)
def test_bad_durations_are_named(bad: object) -> None:
    with pytest.raises(InvalidDuration, match="duration"):
        seconds(bad)  # type: ignore[arg-type]


@given(st.text(max_size=20))
def test_any_text_is_a_duration_or_a_clear_error(text: str) -> None:
    try:
        value = seconds(text)
    except InvalidDuration as error:
        message = str(error)
    else:
        assert math.isfinite(value)
        assert value >= 0
        return
    assert repr(text) in message


# -- item files ---------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
_ID = st.text(
    alphabet=st.characters(
        min_codepoint=0x20, max_codepoint=0x2FFF, exclude_categories=("Cc", "Cs")
    ),
    min_size=1,
    max_size=40,
)


@given(st.lists(st.binary(max_size=60), max_size=8))
def test_any_bytes_become_items_or_numbered_reasons(lines: list[bytes]) -> None:
    for entry in scan(lines, Defaults()):
        assert isinstance(entry, NewItem | BadLine)
        if isinstance(entry, BadLine):
            assert 1 <= entry.number <= len(lines)
            assert entry.reason


@given(_ID, st.dictionaries(st.text(min_size=1, max_size=5), _JSON, max_size=4))
def test_a_valid_item_reads_back_as_written(item_id: str, data: dict[str, object]) -> None:
    assume("\\u0000" not in json.dumps(data))  # a NUL is refused (tested below)
    line = json.dumps({"id": item_id, "tags": ["t"], "data": data}).encode()
    (entry,) = scan([line], Defaults())
    assert isinstance(entry, NewItem), entry
    assert (entry.id, dict(entry.tags), entry.data) == (item_id, {"t": None}, data)


@given(st.text(max_size=5), st.text(max_size=5))
def test_a_nul_anywhere_in_data_is_refused_with_its_line(before: str, after: str) -> None:
    good = json.dumps({"id": "a"}).encode()
    bad = json.dumps({"id": "b", "data": {"k": [before + "\x00" + after]}}).encode()
    entries = list(scan([good, bad], Defaults()))
    assert isinstance(entries[0], NewItem)
    assert isinstance(entries[1], BadLine)
    assert entries[1].number == 2
    assert "NUL" in entries[1].reason


@given(st.text(max_size=5))
def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(text: str) -> None:
    assume("\x00" not in text)
    data = {"k": text + "\\u0000"}  # a backslash, then "u0000": no NUL in it
    (entry,) = scan([json.dumps({"id": "a", "data": data}).encode()], Defaults())
    assert isinstance(entry, NewItem), entry
    assert entry.data == data
