"""The rules a browser crawl adds: render, custom_js, preset (personas) and cookie, with
the last matching rule winning as for every other setting, and bad values refused."""

from __future__ import annotations

import pytest

from trawl.crawl.options import Options
from trawl.crawl.personas import PRESETS
from trawl.crawl.rendering import lease_for, renders
from trawl.crawl.rules import DEFAULT_USER_AGENT, MAX_SCRIPT, Ruleset, Settings, make_rule
from trawl.model.errors import InvalidInput


def test_browser_rules_apply_per_url_and_the_last_one_wins() -> None:
    rules = Ruleset(
        1,
        [
            make_rule("render", "/app/", "browser"),
            make_rule("render", "/app/static/", "plain"),
            make_rule("custom_js", ".", "return 1;"),
            make_rule("preset", "/m/", "mobile-chrome"),
            make_rule("user_agent", "/m/ua/", "own-agent/1"),
            make_rule("cookie", "", "session=abc"),
            make_rule("cookie", "/m/", "session=def"),
        ],
    )
    app = rules.settings("http://h/app/x")
    assert (app.render, app.custom_js, app.preset) == ("browser", "return 1;", None)
    assert app.user_agent == DEFAULT_USER_AGENT
    assert app.cookies == {"session": "abc"}
    assert rules.settings("http://h/app/static/x").render == "plain"
    assert rules.settings("http://h/other").render is None  # the crawl's --browser decides
    mobile = rules.settings("http://h/m/x")
    assert mobile.preset == "mobile-chrome"
    assert mobile.user_agent == PRESETS["mobile-chrome"].user_agent  # a preset is a UA too
    assert mobile.cookies == {"session": "def"}
    assert rules.settings("http://h/m/ua/x").user_agent == "own-agent/1"  # a later UA rule


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("preset", "desktop-netscape", "unknown user agent preset 'desktop-netscape'; there are"),
        ("render", "pdf", "one of browser, plain"),
        ("custom_js", "   ", "is empty"),
        ("custom_js", "x" * (MAX_SCRIPT + 1), "longer than"),
        ("cookie", "no-equals-sign", "'name=value'"),
    ],
)
def test_bad_browser_rules_are_refused_naming_what_is_wrong(
    kind: str, value: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        make_rule(kind, ".", value)


class _Resp:
    def __init__(self, status: int, content_type: str, truncated: bool = False) -> None:
        self.status, self.content_type, self.truncated = status, content_type, truncated


@pytest.mark.parametrize(
    ("browser", "render", "status", "kind", "truncated", "expected"),
    [
        (True, None, 200, "text/html", False, True),
        (False, None, 200, "text/html", False, False),
        (False, "browser", 200, "text/html", False, True),
        (True, "plain", 200, "text/html", False, False),
        (True, None, 301, "text/html", False, False),  # redirects are followed as pages
        (True, None, 404, "text/html", False, False),
        (True, None, 200, "image/png", False, False),
        (True, None, 200, "text/html", True, False),  # a cut page is not rendered
    ],
)
def test_which_responses_render(
    browser: bool, render: str | None, status: int, kind: str, truncated: bool, expected: bool
) -> None:
    resp = _Resp(status, kind, truncated)
    assert renders(Options(browser=browser), Settings(render=render), resp) is expected  # type: ignore[arg-type]


def test_a_browser_crawl_gets_a_lease_that_covers_a_whole_page() -> None:
    plain = Options()
    assert lease_for(plain, 60.0) == 60.0  # plain crawls keep the lease asked for
    browser = Options(browser=True)  # 30 s fetch + 59 s page + 5 s
    assert lease_for(browser, 60.0) == 94.0
    assert lease_for(browser, 300.0) == 300.0  # a longer one is kept
