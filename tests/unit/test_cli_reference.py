"""The CLI reference in docs/ is what the commands' --help says now, and says enough."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest

from trawl.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    path = ROOT / "scripts" / "gen_cli_reference.py"
    spec = importlib.util.spec_from_file_location("gen_cli_reference", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands() -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []

    def visit(command: click.Command, path: str) -> None:
        found.append((path, command))
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):  # the root loads its commands lazily
                sub = command.get_command(ctx, name)
                assert sub is not None, f"{path} lists {name} but cannot load it"
                visit(sub, f"{path} {name}")

    visit(cli, "trawl")
    assert len(found) > 50, "every command and subcommand is listed"
    return found


def test_reference_is_current() -> None:
    generator = _generator()
    current = (ROOT / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    assert current == generator.render(), (
        "docs/cli-reference.md is out of date with the commands' --help: "
        "run `.venv/bin/python scripts/gen_cli_reference.py` and commit the result"
    )


def test_reference_covers_every_command() -> None:
    text = _generator().render()
    for path, _ in _commands():
        assert f"## {path}\n" in text, f"{path} is missing from the CLI reference"


def _params(commands: list[tuple[str, click.Command]]) -> list[Any]:
    return [pytest.param(path, command, id=path) for path, command in commands]


@pytest.mark.parametrize(("path", "command"), _params(_commands()))
def test_every_command_has_help(path: str, command: click.Command) -> None:
    assert (command.help or "").strip(), f"{path} has no help text"


def _json_commands() -> list[tuple[str, click.Command]]:
    return [
        (path, command)
        for path, command in _commands()
        if any(p.name == "as_json" for p in command.params)
    ]


@pytest.mark.parametrize(("path", "command"), _params(_json_commands()))
def test_json_shape_is_documented(path: str, command: click.Command) -> None:
    # A --json command describes the object it prints: its help shows a JSON example.
    assert "{" in (command.help or ""), f"{path} has --json but its help shows no JSON shape"


def test_read_commands_have_json() -> None:
    names = {path for path, _ in _json_commands()}
    assert {
        "trawl show",
        "trawl status",
        "trawl failures",
        "trawl journal",
        "trawl db current",
    } <= names
