"""The public API's types hold for a user's type checker: a decorated task keeps its type,
a misspelt task option or hook argument is a type error (checked by running mypy)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api

from trawl.runtime import hookspecs
from trawl.runtime.plugins import Plugins

USER_CODE = """
    import trawl
    from trawl.runtime import hookspecs
    from trawl.runtime.plugins import Plugins

    app = trawl.App("sqlite:///:memory:")

    @app.task(tags=["product"], ttl="7d", retries=2)
    async def price(ctx: trawl.Context) -> dict[str, float]:
        return {"price": 1.0}

    @app.task
    def plain(ctx: trawl.Context) -> None:
        return None

    reveal_type(price)
    reveal_type(plain)
    price("not a context")  # E1

    @app.task(tagz=["product"])  # E2
    def typo(ctx: trawl.Context) -> None: ...

    def on_tick(orchestrator: trawl.OrchestratorView) -> int:
        return orchestrator.max_actors + len(orchestrator.actors)

    actor = trawl.ActorInfo(type="t", key=None, pid=1, owner="o", tasks=("t",))
    Plugins().fire(hookspecs.trawl_actor_startup, actor=actor)
    Plugins().fire(hookspecs.trawl_actor_startup, actr=actor)  # E3
"""


@pytest.fixture(scope="module")
def mypy_output(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("user")
    path = folder / "user.py"
    path.write_text(textwrap.dedent(USER_CODE))
    cache = Path(__file__).parents[2] / ".mypy_cache"
    out, err, _ = api.run(["--strict", "--no-error-summary", "--cache-dir", str(cache), str(path)])
    assert not err, err
    return out.splitlines()


def _line(marker: str) -> int:
    lines = textwrap.dedent(USER_CODE).splitlines()
    return next(n for n, text in enumerate(lines, 1) if marker in text)


def _at(output: list[str], line: int) -> list[str]:
    return [entry for entry in output if f"user.py:{line}:" in entry]


def test_a_decorated_task_keeps_its_type(mypy_output: list[str]) -> None:
    (price,) = _at(mypy_output, _line("reveal_type(price)"))
    assert "def (ctx: trawl.runtime.context.Context) -> typing.Coroutine" in price
    assert "dict[str, float]" in price
    (plain,) = _at(mypy_output, _line("reveal_type(plain)"))
    assert "def (ctx: trawl.runtime.context.Context)" in plain
    assert _at(mypy_output, _line("# E1")), "calling a task wrongly must be a type error"


def test_a_misspelt_task_option_is_a_type_error(mypy_output: list[str]) -> None:
    errors = " ".join(_at(mypy_output, _line("# E2")))
    assert "tagz" in errors


def test_a_misspelt_hook_argument_is_a_type_error(mypy_output: list[str]) -> None:
    errors = " ".join(_at(mypy_output, _line("# E3")))
    assert "actr" in errors


def test_correct_use_type_checks(mypy_output: list[str]) -> None:
    flagged = {f"user.py:{_line(m)}:" for m in ("# E1", "# E2", "# E3")}
    errors = [e for e in mypy_output if ": error:" in e]
    assert [e for e in errors if not any(f in e for f in flagged)] == []


def test_firing_something_that_is_not_a_hookspec_is_refused() -> None:
    def trawl_actor_startup(actor: object) -> None: ...

    with pytest.raises(TypeError, match="not a hookspec"):
        Plugins(entry_points=False).fire(trawl_actor_startup, actor=None)
    Plugins(entry_points=False).fire(hookspecs.trawl_actor_startup, actor=None)  # type: ignore[arg-type]
