"""How a worker reports while it runs: logging to stderr and a progress line.

On a terminal the progress is one live line that logs scroll above; anywhere else
(a file, a pipe, a service manager) it is a log line every few seconds.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator

from rich.live import Live
from rich.logging import RichHandler
from rich.text import Text

from trawl.cli.output import console
from trawl.runtime.stats import WorkerStats

log = logging.getLogger("trawl.progress")

OnProgress = Callable[[WorkerStats], None]


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def configure_logging(level: str) -> None:
    """Log to stderr: through rich on a terminal, as plain timestamped lines elsewhere."""
    handler: logging.Handler
    if stderr_is_terminal():
        handler = RichHandler(console=console(stderr=True), show_path=False, markup=False)
        handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)


def summary(stats: WorkerStats) -> str:
    elapsed = time.monotonic() - stats.started
    return (
        f"done {stats.done:,}  failed {stats.failed:,}  running {stats.running}  "
        f"{stats.rate():,.1f}/s  elapsed {elapsed:,.0f}s"
    )


@contextlib.contextmanager
def reporter(enabled: bool, log_every: float) -> Iterator[OnProgress | None]:
    """The worker's progress callback for as long as the block runs (``None``: no progress)."""
    if not enabled:
        yield None
    elif stderr_is_terminal():
        with _live() as update:
            yield update
    else:
        yield Throttled(log_every)


@contextlib.contextmanager
def _live() -> Iterator[OnProgress]:
    with Live(Text(""), console=console(stderr=True), refresh_per_second=4) as live:

        def update(stats: WorkerStats) -> None:
            live.update(Text(summary(stats)))

        yield update


class Throttled:
    """Logs the progress line at most once every *interval* seconds."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.last = time.monotonic()

    def __call__(self, stats: WorkerStats) -> None:
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            log.info("progress: %s", summary(stats))
