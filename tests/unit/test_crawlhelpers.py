"""`trawl crawl --processes`' helpers are stopped when the command ends: SIGTERM first,
SIGKILL for one that does not go, and a helper that failed is said."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from trawl.cli import crawlhelpers


def _child(code: str) -> subprocess.Popen[bytes]:
    """A process running *code* once it has run everything before its ``ready()`` call
    (its signal handler set): a fixed sleep was too short for a slow start under load."""
    ready = "def ready():\n    print('ready', flush=True)\n"
    child = subprocess.Popen([sys.executable, "-c", ready + code], stdout=subprocess.PIPE)
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    return child


def test_a_helper_that_stops_on_sigterm_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    child = _child("import time; ready(); time.sleep(60)")
    crawlhelpers.stop([child], wait=10)
    assert child.returncode == -15
    assert not caplog.records


def test_a_helper_that_ignores_sigterm_is_killed_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    child = _child(
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); ready(); time.sleep(60)"
    )
    with caplog.at_level(logging.WARNING, "trawl.crawl"):
        crawlhelpers.stop([child], wait=0.5)
    assert child.returncode == -9
    assert f"helper process {child.pid} exited with status -9" in caplog.text


def test_a_helper_that_failed_on_its_own_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    child = _child("ready(); raise SystemExit(3)")
    child.wait(timeout=30)  # it ended before the command stopped it
    with caplog.at_level(logging.WARNING, "trawl.crawl"):
        crawlhelpers.stop([child], wait=10)
    assert f"helper process {child.pid} exited with status 3" in caplog.text
