"""`trawl crawl --browser` and the browser rules from the command line: bad input is
refused with an error naming what was wrong, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import site_crawl
from trawl.cli.main import main
from trawl.crawl import operations
from trawl.crawl.browser.chromium import ENV
from trawl.store.store import Store


@pytest.fixture
def crawl_id(sqlite_url: str) -> int:
    return site_crawl.create(sqlite_url, None, seeds=("http://127.0.0.1:9/",))


def _rules(url: str, crawl_id: int) -> list[dict[str, object]]:
    with Store(url) as store:
        return operations.rules(store, crawl_id)[1]


def test_browser_rules_are_added_from_the_command_line(
    sqlite_url: str, crawl_id: int, tmp_path: Path
) -> None:
    script = tmp_path / "scroll.js"
    script.write_text("window.scrollTo(0, document.body.scrollHeight); return 1;")
    base = ["--db", sqlite_url, "crawl", "rule", "add", str(crawl_id)]
    assert main([*base, "--render", "browser", "--match", "/app/"]) == 0
    assert main([*base, "--custom-js", str(script), "--match", "."]) == 0
    assert main([*base, "--user-agent-preset", "desktop-chrome"]) == 0
    assert main([*base, "--cookie", "consent=yes"]) == 0
    added = [(r["kind"], r["match"], r["value"]) for r in _rules(sqlite_url, crawl_id)[-4:]]
    assert added == [
        ("render", "/app/", "browser"),
        ("custom_js", ".", script.read_text()),  # the text: workers elsewhere run it
        ("preset", "", "desktop-chrome"),
        ("cookie", "", "consent=yes"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user-agent-preset", "desktop-lynx"], "unknown user agent preset 'desktop-lynx'"),
        (["--custom-js", "/nonexistent/scroll.js"], "cannot read /nonexistent/scroll.js"),
        (["--render", "pdf"], "'pdf' is not one of 'browser', 'plain'"),
        (["--cookie", "oops"], "a cookie rule's value is 'name=value'"),
    ],
)
def test_bad_browser_rules_are_refused(
    sqlite_url: str,
    crawl_id: int,
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = _rules(sqlite_url, crawl_id)
    code = main(["--db", sqlite_url, "crawl", "rule", "add", str(crawl_id), *args])
    assert code != 0
    assert message in capsys.readouterr().err
    assert _rules(sqlite_url, crawl_id) == before


def test_browser_without_chromium_is_refused(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV, "/nonexistent/chromium")
    code = main(["--db", sqlite_url, "crawl", "http://127.0.0.1:9/", "--browser"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--browser: TRAWL_CHROMIUM=/nonexistent/chromium is not an executable file" in err
    with Store(sqlite_url) as store:
        assert operations.all_crawls(store) == []
