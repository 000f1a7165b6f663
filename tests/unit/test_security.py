"""What another user or a database row must not be able to do: plant files in the runtime
directory, redirect the lock through a symlink, or make a worker import a module."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from trawl.crawl import rules
from trawl.model.errors import InvalidInput, TrawlError
from trawl.runtime import lock
from trawl.runtime.loader import load_app


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "run"
    monkeypatch.setenv("TRAWL_RUNTIME_DIR", str(path))
    return path


def test_the_runtime_directory_is_made_private(runtime: Path) -> None:
    assert lock.runtime_dir() == runtime
    assert runtime.stat().st_mode & 0o777 == 0o700


def test_a_runtime_directory_others_can_write_is_refused(runtime: Path) -> None:
    runtime.mkdir(mode=0o777)
    runtime.chmod(0o777)
    with pytest.raises(TrawlError, match=r"has mode 0777; it must be 0700"):
        lock.runtime_dir()


def test_a_runtime_directory_of_another_user_is_refused(runtime: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    runtime.mkdir(mode=0o700)
    os.chown(runtime, 65534, 65534)
    with pytest.raises(TrawlError, match="belongs to uid 65534, not to you"):
        lock.runtime_dir()


def test_a_symlinked_runtime_directory_is_refused(runtime: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    runtime.symlink_to(elsewhere)
    with pytest.raises(TrawlError, match="is not a directory"):
        lock.runtime_dir()


def test_the_lock_file_is_not_opened_through_a_symlink(runtime: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    lock.runtime_dir()
    lock.lock_path(url).symlink_to(victim)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        lock.OrchestratorLock(url).acquire()
    assert victim.read_text() == "keep me"


def test_rule_hooks_import_only_modules_an_operator_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(rules.HOOK_MODULES_ENV, raising=False)
    spec = "tests.support.rule_hooks:mobile"
    with pytest.raises(
        InvalidInput, match=re.escape("--allow-hook-module tests.support.rule_hooks")
    ):
        rules.load_hook(spec)
    rules.allow_hook_modules(["tests.support.rule_hooks"])
    assert rules.load_hook(spec)("http://h/", None) == {"user_agent": "mobile (http://h/)"}
    assert os.environ[rules.HOOK_MODULES_ENV] == "tests.support.rule_hooks"  # for children


def test_loading_an_app_by_module_leaves_the_current_directory_off_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "myapp.py").write_text("import trawl\napp = trawl.App()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_app("myapp:app") is not None
    assert "" not in sys.path
