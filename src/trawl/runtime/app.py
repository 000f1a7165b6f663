"""The user's app: task declarations (``@app.task``) and where the database is."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trawl.model.durations import Duration, optional_seconds, seconds
from trawl.model.errors import InvalidInput, UnknownTask
from trawl.model.ids import check_tag
from trawl.model.records import TaskInfo
from trawl.store.url import default_url

if TYPE_CHECKING:
    from trawl.runtime.context import Context

TaskFunction = Callable[["Context"], Any]

DEFAULT_TIMEOUT = 300.0
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF = 2.0


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskDef:
    """A declared task: the function and how trawl runs it."""

    name: str
    fn: TaskFunction
    is_async: bool
    tags: tuple[str, ...]
    version: str
    ttl: float | None
    timeout: float
    retries: int
    backoff: float
    niceness: int

    def info(self) -> TaskInfo:
        return TaskInfo(
            name=self.name,
            version=self.version,
            tags=self.tags,
            ttl=self.ttl,
            timeout=self.timeout,
            retries=self.retries,
            niceness=self.niceness,
        )


class App:
    """A set of tasks and the database they run against.

    ``db`` defaults to ``TRAWL_DB`` from the environment, else ``sqlite:///trawl.db``;
    ``trawl --db`` overrides both.
    """

    def __init__(self, db: str | None = None) -> None:
        self.db = db or default_url()
        self.tasks: dict[str, TaskDef] = {}

    def task(
        self,
        fn: TaskFunction | None = None,
        *,
        name: str | None = None,
        tags: Iterable[str] = (),
        version: str | int = "1",
        ttl: Duration | None = None,
        timeout: Duration = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: Duration = DEFAULT_BACKOFF,
        niceness: int = 0,
    ) -> Any:
        """Declare a task; it runs on every item carrying one of *tags*.

        ``version``: bump it when results made by older code should be redone.
        ``ttl``: how long a result stays fresh (``None``: forever). ``timeout``: the longest
        an attempt may run. ``retries``: further attempts after a failure, ``backoff`` apart
        (doubling, with jitter). ``niceness``: lower runs first.
        """

        def register(func: TaskFunction) -> TaskFunction:
            task_name = name or func.__name__
            if task_name in self.tasks:
                raise InvalidInput(f"task {task_name!r} is declared twice")
            if isinstance(tags, str):
                raise InvalidInput(f"task {task_name!r}: tags must be a list, not {tags!r}")
            if not isinstance(retries, int) or retries < 0:
                raise InvalidInput(f"task {task_name!r}: retries must be >= 0, got {retries!r}")
            self.tasks[task_name] = TaskDef(
                name=task_name,
                fn=func,
                is_async=inspect.iscoroutinefunction(func),
                tags=tuple(check_tag(t) for t in tags),
                version=str(version),
                ttl=optional_seconds(ttl),
                timeout=_positive(seconds(timeout), task_name, "timeout"),
                retries=retries,
                backoff=seconds(backoff),
                niceness=int(niceness),
            )
            return func

        return register(fn) if fn is not None else register

    def get(self, name: str) -> TaskDef:
        try:
            return self.tasks[name]
        except KeyError:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise UnknownTask(f"unknown task {name!r} (this app declares: {known})") from None

    def select(self, names: Iterable[str] | None) -> list[TaskDef]:
        """The tasks named (all when ``None``), checking every name."""
        if names is None:
            return list(self.tasks.values())
        return [self.get(n) for n in names]


def _positive(value: float, task: str, what: str) -> float:
    if value <= 0:
        raise InvalidInput(f"task {task!r}: {what} must be positive")
    return value
