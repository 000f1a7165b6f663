"""How the long-running commands report: logging to stderr, and one progress reporter.

`trawl worker`, `trawl crawl` and `trawl run` each show their progress the same way, only
in their own format: on a terminal a live view that logs scroll above; anywhere else (a
file, a pipe, a service manager) a ``progress:`` log line every few seconds, with the
figures as structured fields where the command has them (JSON under ``--log-json``).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rich.console import RenderableType
from rich.live import Live
from rich.logging import RichHandler
from rich.text import Text

from trawl.cli.output import console
from trawl.runtime import logs
from trawl.runtime.stats import WorkerStats

log = logging.getLogger(logs.PROGRESS)

T = TypeVar("T")


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def configure_logging(level: str, *, as_json: bool = False) -> None:
    """Log to stderr: through rich on a terminal, as plain timestamped lines (or JSON
    lines) elsewhere."""
    handler: logging.Handler | None = None
    if stderr_is_terminal() and not as_json:
        handler = RichHandler(console=console(stderr=True), show_path=False, markup=False)
        handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
    logs.setup(level, handler=handler, as_json=as_json)


@dataclass(frozen=True, kw_only=True, slots=True)
class Format(Generic[T]):
    """How one command shows a progress value *T*: a live view, a log line, and the
    figures as structured log fields (for ``--log-json``)."""

    view: Callable[[T], RenderableType]
    line: Callable[[T], str]
    fields: Callable[[T], dict[str, Any]] = field(default=lambda _: {})


@dataclass(kw_only=True, slots=True)
class Report(Generic[T]):
    """Called with each new progress value; ``live`` says whether a live view shows it."""

    show: Callable[[T], None]
    live: bool

    def __call__(self, value: T) -> None:
        self.show(value)


@contextlib.contextmanager
def reporter(
    enabled: bool, every: float, fmt: Format[T], *, as_json: bool = False
) -> Iterator[Report[T] | None]:
    """The progress callback for as long as the block runs (``None``: no progress)."""
    if not enabled:
        yield None
    elif stderr_is_terminal() and not as_json:
        with Live(Text(""), console=console(stderr=True), refresh_per_second=4) as live:
            yield Report(show=lambda value: live.update(fmt.view(value)), live=True)
    else:
        yield Report(show=_Throttled(every, fmt), live=False)


class _Throttled(Generic[T]):
    """Logs the progress line at most once every *interval* seconds."""

    def __init__(self, interval: float, fmt: Format[T]) -> None:
        self.interval = interval
        self.fmt = fmt
        self.last = time.monotonic()

    def __call__(self, value: T) -> None:
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            log.info("progress: %s", self.fmt.line(value), extra=self.fmt.fields(value))


def summary(stats: WorkerStats) -> str:
    elapsed = time.monotonic() - stats.started
    return (
        f"done {stats.done:,}  failed {stats.failed:,}  running {stats.running}  "
        f"{stats.rate():,.1f}/s  elapsed {elapsed:,.0f}s"
    )


WORKER: Format[WorkerStats] = Format(view=lambda stats: Text(summary(stats)), line=summary)
