"""robots.txt per RFC 9309: wildcards, longest match, Allow on a tie, and what a fetch's
status means; with properties checked over generated paths."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trawl.crawl.robots import ERROR_TTL, ROBOTS_TTL, UNREACHABLE, Robots

AGENT = "trawl/0.1 (+https://example.org/bot)"


def robots(body: str, status: int = 200) -> Robots:
    return Robots(status, body)


@pytest.mark.parametrize(
    ("body", "path", "allowed"),
    [
        ("User-agent: *\nDisallow: /*.pdf$", "/a/b.pdf", False),
        ("User-agent: *\nDisallow: /*.pdf$", "/a/b.pdf?x=1", True),
        ("User-agent: *\nDisallow: /*.pdf$", "/a/b.pdfx", True),
        ("User-agent: *\nAllow: /\nDisallow: /private", "/private/x", False),
        ("User-agent: *\nAllow: /\nDisallow: /private", "/public", True),
        ("User-agent: *\nDisallow: /p\nAllow: /p", "/p", True),  # a tie: Allow wins
        ("User-agent: *\nDisallow: /shop\nAllow: /shop/public", "/shop/public/x", True),
        ("User-agent: *\nDisallow: /shop/\nAllow: /shop", "/shop/x", False),  # longer wins
        ("User-agent: *\nDisallow: /*/secret", "/a/b/secret/c", False),
        ("User-agent: other\nDisallow: /\n\nUser-agent: *\nAllow: /", "/x", True),
        ("User-agent: trawl\nDisallow: /mine\n\nUser-agent: *\nDisallow: /", "/x", True),
        ("User-agent: trawl\nDisallow: /mine\n\nUser-agent: *\nDisallow: /", "/mine", False),
        ("", "/anything", True),
    ],
)
def test_rules(body: str, path: str, allowed: bool) -> None:
    assert robots(body).allowed(f"http://h.example{path}", AGENT) is allowed


def test_a_4xx_means_no_rules_and_is_kept_a_day() -> None:
    found = robots("User-agent: *\nDisallow: /", status=404)
    assert found.allowed("http://h/x", AGENT)
    assert not found.unavailable
    assert found.expires(1000.0) == 1000.0 + ROBOTS_TTL


@pytest.mark.parametrize("status", [500, 503, UNREACHABLE])
def test_a_5xx_or_no_answer_disallows_everything_and_is_asked_again_soon(status: int) -> None:
    found = robots("User-agent: *\nAllow: /", status=status)
    assert found.unavailable
    assert not found.allowed("http://h/x", AGENT)
    assert found.expires(1000.0) == 1000.0 + ERROR_TTL
    assert ERROR_TTL <= 600


def test_crawl_delay_of_the_agents_own_group_else_star_with_fractions() -> None:
    body = "User-agent: trawl\nCrawl-delay: 0.25\n\nUser-agent: *\nCrawl-delay: 7\n"
    assert robots(body).delay(AGENT) == 0.25
    assert robots(body).delay("other/1.0") == 7.0
    assert robots("User-agent: *\nDisallow:").delay(AGENT) == 0.0


_SEGMENT = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=8)
_PATH = st.lists(_SEGMENT, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


@given(_PATH)
def test_allow_and_disallow_of_the_same_path_allows(path: str) -> None:
    body = f"User-agent: *\nDisallow: {path}\nAllow: {path}\n"
    assert robots(body).allowed(f"http://h{path}", AGENT)


@given(_PATH, _PATH)
def test_a_disallowed_prefix_disallows_what_lies_under_it(prefix: str, rest: str) -> None:
    body = f"User-agent: *\nDisallow: {prefix}\n"
    assert not robots(body).allowed(f"http://h{prefix}{rest}", AGENT)


@given(_PATH, _SEGMENT)
def test_the_longer_rule_wins_whichever_comes_first(prefix: str, more: str) -> None:
    longer = f"{prefix}/{more}"
    for body in (
        f"User-agent: *\nAllow: {longer}\nDisallow: {prefix}\n",
        f"User-agent: *\nDisallow: {prefix}\nAllow: {longer}\n",
    ):
        assert robots(body).allowed(f"http://h{longer}/x", AGENT)
        assert not robots(body).allowed(f"http://h{prefix}/_{more}", AGENT)


@given(_PATH)
def test_a_dollar_anchors_the_end(path: str) -> None:
    body = f"User-agent: *\nDisallow: {path}$\n"
    assert not robots(body).allowed(f"http://h{path}", AGENT)
    assert robots(body).allowed(f"http://h{path}x", AGENT)
