"""The progress bar of a command that reads a big file: lines and bytes read of its size,
drawn on stderr while it is a terminal, and gone when the command ends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from trawl.cli.output import console

STEP = 1 << 20  # bytes between updates: a line costs a few microseconds, a redraw far more


class Mark(NamedTuple):
    """How far into the file: lines and bytes read."""

    lines: int
    bytes: int


class FileBar:
    """Counts the lines passing through :meth:`track`; draws them when it has a display."""

    def __init__(self, progress: Progress | None) -> None:
        self._progress = progress
        self._read = Mark(0, 0)

    def track(self, lines: Iterable[bytes], what: str, size: int | None) -> Iterator[bytes]:
        if self._progress is None:
            return iter(lines)
        return self._counted(
            self._progress, lines, self._progress.add_task(what, total=size, lines=0)
        )

    def _counted(self, progress: Progress, lines: Iterable[bytes], task: TaskID) -> Iterator[bytes]:
        count = done = pending = 0
        for line in lines:
            count += 1
            pending += len(line)
            self._read = Mark(count, done + pending)
            if pending >= STEP:
                progress.update(task, advance=pending, lines=count)
                done += pending
                pending = 0
            yield line
        progress.update(task, advance=pending, lines=count)

    def mark(self) -> Mark:
        """Where :meth:`track` has got to: the end of the line it last passed on (nothing
        is counted without a display)."""
        return self._read

    def stepper(self, what: str, size: int) -> Callable[[Mark], None]:
        """A second bar over the *size* bytes already read, for work done on what was read:
        moved to a :class:`Mark` at each step."""
        progress = self._progress
        if progress is None:
            return lambda _mark: None
        task = progress.add_task(what, total=size, lines=0)
        return lambda mark: progress.update(task, completed=mark.bytes, lines=mark.lines)


@contextlib.contextmanager
def file_bar(enabled: bool) -> Iterator[FileBar]:
    """A bar for the block when *enabled* and both stdout and stderr are a terminal (a user
    watching, not a script reading the output); else one that draws nothing."""
    stderr = console(stderr=True)
    if not (enabled and stderr.is_terminal and console().is_terminal):
        yield FileBar(None)
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[lines]:,} lines"),
        DownloadColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=stderr, transient=True) as progress:
        yield FileBar(progress)
