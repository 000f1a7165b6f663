"""What every command shares: the database setting, opening the store, common options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from trawl.crawl.rules import allow_hook_modules
from trawl.model.durations import seconds
from trawl.model.errors import InvalidDuration, InvalidInput
from trawl.store import migrate
from trawl.store.store import Store
from trawl.store.url import default_url

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Settings:
    """The root command's options, handed to every subcommand through the click context."""

    db: str | None  # --db or TRAWL_DB; None when neither was given

    @property
    def url(self) -> str:
        return self.db or default_url()


def settings() -> Settings:
    return click.get_current_context().find_object(Settings) or Settings(db=None)


def open_store() -> Store:
    """The store for ``--db``, closed when the command ends, its schema checked first.

    SQLite databases are created and upgraded on first use; PostgreSQL ones must be
    upgraded on purpose with ``trawl db upgrade``.
    """
    store = Store(settings().url)
    click.get_current_context().call_on_close(store.close)
    migrate.ensure(store.db, auto=store.is_sqlite)
    return store


def utf8(value: str, what: str) -> str:
    """*value* if it can be stored: undecodable bytes in an argument arrive as surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} {value!r} is not valid UTF-8") from None
    return value


def task_option(**attrs: Any) -> Callable[[F], F]:
    """``--task TASK``: a task name, checked to be storable text."""
    return click.option("--task", metavar="TASK", callback=_utf8, **attrs)


def _utf8(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    try:
        return utf8(value, "task name") if value is not None else None
    except InvalidInput as error:
        raise click.BadParameter(str(error)) from None


def json_option(fn: F) -> F:
    """``--json``: print the documented JSON shape instead of a table."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON (shape described above)."
    )(fn)


def duration(ctx: click.Context, param: click.Parameter, value: Any) -> float:
    """Option callback: seconds, or units such as ``90s``, ``5m``, ``1h30m``."""
    try:
        return seconds(value)
    except InvalidDuration as error:
        raise click.BadParameter(str(error)) from None


def grace_option(fn: F) -> F:
    """``--grace DURATION``: how long running tasks may finish after SIGINT/SIGTERM."""
    return click.option(
        "--grace",
        metavar="DURATION",
        callback=duration,
        default="30s",
        show_default=True,
        help="On SIGINT/SIGTERM, how long running tasks may take to finish.",
    )(fn)


def progress_every_option(fn: F) -> F:
    """``--progress-every DURATION``: the interval of progress log lines off a terminal."""
    return click.option(
        "--progress-every",
        metavar="DURATION",
        callback=duration,
        default="5s",
        show_default=True,
        help="Time between progress log lines when stderr is not a terminal.",
    )(fn)


def _allow_hooks(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    allow_hook_modules(value)


def allow_hook_option(fn: F) -> F:
    """``--allow-hook-module M``: modules crawl rule hooks may import in this process."""
    return click.option(
        "--allow-hook-module",
        "allow_hook_module",
        multiple=True,
        metavar="MODULE",
        callback=_allow_hooks,
        expose_value=False,
        help="Let crawl rule hooks (`module:function`) import MODULE (repeatable); "
        "hooks naming any other module fail their page.",
    )(fn)
