"""The plugin manager: every hook documented, plugins isolated from each other and the work."""

from __future__ import annotations

import inspect
import logging
import re
from pathlib import Path
from typing import Any

import pluggy
import pytest

import trawl
from trawl.model.records import AttemptResult, CommitReport, FailureInfo
from trawl.model.states import Outcome
from trawl.runtime import hookspecs
from trawl.runtime.actor.hooks import ActorHooks
from trawl.runtime.plugins import Plugins

ROOT = Path(__file__).resolve().parents[2]
ACTOR = trawl.ActorInfo(type="work", key=None, pid=1, owner="me", tasks=("work",))


def _specs() -> list[tuple[str, Any]]:
    return [(name, getattr(hookspecs, name)) for name in Plugins.names()]


@pytest.mark.parametrize(("name", "spec"), _specs(), ids=[n for n, _ in _specs()])
def test_every_hookspec_has_a_one_line_contract_and_a_docs_entry(name: str, spec: Any) -> None:
    doc = inspect.getdoc(spec) or ""
    assert doc.strip(), f"{name} has no docstring"
    assert "\n" not in doc.strip(), f"{name}: the contract is one line"
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert re.search(rf"^\| `{name}` \|", docs, re.MULTILINE), f"{name} is not in docs/plugins.md"


def test_the_docs_name_no_hook_that_does_not_exist() -> None:
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(trawl_\w+)` \|", docs, re.MULTILINE))
    assert documented == set(Plugins.names())


class Recorder:
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name, self.calls = name, calls

    @trawl.hookimpl
    def trawl_actor_startup(self, actor: trawl.ActorInfo) -> None:
        self.calls.append(f"{self.name}:{actor.type}")


class Broken:
    @trawl.hookimpl
    def trawl_actor_startup(self) -> None:
        raise RuntimeError("plugin bug")


def test_a_plugin_that_raises_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    plugins = Plugins(
        [Recorder("first", calls), Broken(), Recorder("last", calls)], entry_points=False
    )
    with caplog.at_level(logging.ERROR, logger="trawl.plugins"):
        plugins.fire(hookspecs.trawl_actor_startup, actor=ACTOR)
    assert calls == ["last:work", "first:work"]  # the last registered is called first
    (record,) = caplog.records
    assert "trawl_actor_startup" in record.getMessage()
    assert record.exc_info is not None


def test_a_hook_nobody_implements_is_known_unimplemented() -> None:
    plugins = Plugins(entry_points=False)
    assert not plugins.implemented(*Plugins.hooks())
    hooks = ActorHooks(plugins, ACTOR)
    assert (hooks.claims, hooks.ticks, hooks.commits, hooks.journaled) == (False,) * 4
    plugins.fire(
        hookspecs.trawl_job_done, actor=ACTOR, job=_result(1, Outcome.SUCCESS)
    )  # nothing to call, nothing raised


def test_a_misspelt_hook_fails_at_registration() -> None:
    class Typo:
        @trawl.hookimpl
        def trawl_job_finished(self, job: Any) -> None: ...

    with pytest.raises(pluggy.PluginValidationError):
        Plugins([Typo()], entry_points=False)


def test_wrappers_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    class Wrapper:
        @trawl.hookimpl(wrapper=True)
        def trawl_actor_startup(self) -> Any:
            yield

    with caplog.at_level(logging.WARNING, logger="trawl.plugins"):
        plugins = Plugins([Wrapper()], entry_points=False)
    assert not plugins.implemented(hookspecs.trawl_actor_startup)
    assert "is a wrapper" in caplog.text


def _result(job_id: int, outcome: Outcome, message: str | None = None) -> AttemptResult:
    return AttemptResult(
        job_id=job_id,
        item_id=f"item:{job_id}",
        task="work",
        attempt=1,
        outcome=outcome,
        version="1",
        ttl=None,
        failure=FailureInfo(error_type="E", message=message) if message else None,
    )


def test_a_commit_report_fires_each_attempts_transition() -> None:
    seen: list[tuple[str, str, str | None]] = []

    class Jobs:
        @trawl.hookimpl
        def trawl_job_done(self, job: AttemptResult) -> None:
            seen.append(("done", job.item_id, None))

        @trawl.hookimpl
        def trawl_job_failed(self, job: AttemptResult, error: str) -> None:
            seen.append(("failed", job.item_id, error))

        @trawl.hookimpl
        def trawl_job_released(self, job: AttemptResult) -> None:
            seen.append(("released", job.item_id, None))

        @trawl.hookimpl
        def trawl_job_stale(self, job: AttemptResult) -> None:
            seen.append(("stale", job.item_id, None))

    hooks = ActorHooks(Plugins([Jobs()], entry_points=False), ACTOR)
    results = [
        _result(1, Outcome.SUCCESS),
        _result(2, Outcome.FAILURE, "boom"),
        _result(3, Outcome.SUCCESS),
        _result(4, Outcome.RELEASED),
        _result(5, Outcome.SUCCESS),
    ]
    report = CommitReport(committed=[1, 2, 3, 4], stale=[5], effect_failures={3: "bad effect"})
    hooks.committed(results, report)
    assert seen == [
        ("done", "item:1", None),
        ("failed", "item:2", "boom"),
        ("failed", "item:3", "bad effect"),
        ("released", "item:4", None),
        ("stale", "item:5", None),
    ]
