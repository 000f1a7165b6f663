"""What every command shares: the database setting, opening the store, common options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from trawl.crawl.rules import allow_hook_modules
from trawl.model.durations import seconds
from trawl.model.errors import InvalidDuration, InvalidInput
from trawl.runtime import procmetrics
from trawl.store.store import Store
from trawl.store.url import default_url

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    """The root command's options, handed to every subcommand through the click context."""

    db: str | None  # --db or TRAWL_DB; None when neither was given

    @property
    def url(self) -> str:
        return self.db or default_url()


def settings() -> GlobalOptions:
    return click.get_current_context().find_object(GlobalOptions) or GlobalOptions(db=None)


def open_store() -> Store:
    """The store for ``--db``, closed when the command ends, its schema checked first.

    SQLite databases are created and upgraded on first use; PostgreSQL ones must be
    upgraded on purpose with ``trawl db upgrade``.
    """
    store = Store(settings().url)
    click.get_current_context().call_on_close(store.close)
    store.ensure_schema(auto=store.is_sqlite)
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


LOG_LEVELS = ("debug", "info", "warning", "error")


def concurrency_option(help: str, *, default: int | None = None) -> Callable[[F], F]:
    """``--concurrency N`` / ``-c N``: how much runs at once (what of, *help* says)."""
    return click.option(
        "--concurrency",
        "-c",
        type=click.IntRange(min=1),
        default=default,
        show_default=default is not None,
        help=help,
    )


def progress_option(view: str) -> Callable[[F], F]:
    """``--progress/--no-progress``; *view* is what a terminal shows ("a live line")."""
    return click.option(
        "--progress/--no-progress",
        "show_progress",
        default=True,
        show_default=True,
        help=f"Report progress on stderr: {view} on a terminal, else a log line.",
    )


def log_level_option(who: str) -> Callable[[F], F]:
    """``--log-level LEVEL``: how much *who* logs on stderr."""
    return click.option(
        "--log-level",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default="info",
        show_default=True,
        help=f"How much {who} on stderr.",
    )


def lease_option(default: float) -> Callable[[F], F]:
    """``--lease DURATION``: how long a killed worker's claims stay held."""
    return click.option(
        "--lease",
        metavar="DURATION",
        callback=duration,
        default=f"{default:g}s",
        show_default=True,
        help="How long a killed worker's pages stay claimed before another takes them.",
    )


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


def metrics_option(fn: F) -> F:
    """``--metrics-port [HOST:]PORT``: serve this process's Prometheus metrics."""
    return click.option(
        "--metrics-port",
        "metrics",
        metavar="[HOST:]PORT",
        callback=_address,
        help="Serve Prometheus metrics of this process (claims, commits by outcome, attempt"
        " durations, lease losses; docs/metrics.md) on 127.0.0.1:PORT or HOST:PORT.",
    )(fn)


def _address(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> tuple[str, int] | None:
    if value is None:
        return None
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not PORT or HOST:PORT (PORT from 1 to 65535)")
    return host.strip("[]") or "127.0.0.1", int(port)


def serve_metrics(address: tuple[str, int] | None, *, actors: bool = False) -> list[object]:
    """Start the metrics endpoint if asked; returns the plugin to register (none if not).
    With *actors* (``trawl run``), child processes' samples are collected too."""
    if address is None:
        return []
    if actors:
        procmetrics.multiprocess_dir()  # before prometheus_client is first imported
    plugin = procmetrics.ProcessMetrics()
    host, port = address
    try:
        procmetrics.serve(port, host)
    except OSError as error:
        raise click.ClickException(
            f"--metrics-port {host}:{port}: {error.strerror or error}"
        ) from None
    return [plugin]
