"""The user's app: task declarations (``@app.task``) and where the database is."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, overload

from trawl.engine.revisit import Adaptive
from trawl.model.durations import Duration, optional_seconds, seconds
from trawl.model.errors import InvalidInput, UnknownTask
from trawl.model.ids import check_tag
from trawl.model.limits import KeyFunction, Limit, make_limit
from trawl.model.records import TaskInfo
from trawl.runtime import recurring_task
from trawl.runtime.actor.spec import Actor
from trawl.runtime.schedule import Schedule, make_schedule
from trawl.store.url import default_url

if TYPE_CHECKING:
    from typing import Unpack

    from trawl.runtime.context import Context

TaskFunction = Callable[["Context"], Any]
F = TypeVar("F", bound=TaskFunction)


class TaskOptions(TypedDict, total=False):
    """The options of ``@app.task(...)`` (documented there), for its typed signature."""

    name: str | None
    tags: Iterable[str]
    version: str | int
    ttl: Duration | None
    timeout: Duration
    retries: int
    backoff: Duration
    niceness: int
    revisit: Adaptive | None
    rate_limit: str | float | None
    exempt_global: bool
    depends_on: Iterable[str]
    rerun_on_change: bool
    max_failures: int | None
    not_found_cooldown: Duration
    not_found_limit: int
    failed_cooldown: Duration | None
    visit_weights: tuple[float, float, float] | None
    actor: Actor | None
    pipeline_tag: str | None
    executor: str
    queue: str | None


DEFAULT_TIMEOUT = 300.0
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF = 2.0
LOCAL = "local"
EXECUTORS = (LOCAL, "celery")


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
    schedule: Schedule = field(default_factory=Schedule)
    actor: Actor = field(default_factory=Actor)  # how `trawl run` runs it
    pipeline_tag: str | None = None  # only remote pipelines with this tag run it
    executor: str = LOCAL  # "celery": Celery workers run it, `trawl feed celery` feeds them
    queue: str | None = None  # the broker queue of an external executor

    @property
    def is_local(self) -> bool:
        """Whether trawl's own workers run it (not an external executor)."""
        return self.executor == LOCAL

    def info(self) -> TaskInfo:
        return TaskInfo(
            name=self.name,
            version=self.version,
            tags=self.tags,
            ttl=self.ttl,
            timeout=self.timeout,
            retries=self.retries,
            niceness=self.niceness,
            depends_on=self.schedule.depends_on,
            rerun_on_change=self.schedule.rerun_on_change,
            max_failures=self.schedule.max_failures,
            pipeline_tag=self.pipeline_tag,
            executor=self.executor,
            queue=self.queue,
        )


class App:
    """A set of tasks and the database they run against.

    ``db`` defaults to ``TRAWL_DB`` from the environment, else ``sqlite:///trawl.db``;
    ``trawl --db`` overrides both. ``plugins``: objects or modules with ``@trawl.hookimpl``
    functions, loaded by every worker, actor and orchestrator of this app (docs/plugins.md).
    """

    def __init__(self, db: str | None = None, *, plugins: Iterable[object] = ()) -> None:
        self.db = db or default_url()
        self.plugins = list(plugins)
        self.tasks: dict[str, TaskDef] = {}
        self.limits: dict[str, Limit] = {}
        # External executors bound to the app, by name (``trawl.celery.bind`` adds "celery"):
        # what `trawl feed` publishes through.
        self.executors: dict[str, Any] = {}
        recurring_task.declare(self)  # recurring schedules run wherever the app runs
        self.builtin = frozenset(self.tasks)

    def limit(
        self,
        name: str,
        rate: str | float,
        *,
        tasks: list[str] | None = None,
        key: KeyFunction | None = None,
        burst: int = 1,
    ) -> Limit:
        """Declare a rate limit shared by every worker on the database.

        ``tasks``: task name patterns it covers (``["shop.*"]``); ``None`` makes it global.
        ``key``: a function of the item (``item.id``, ``item.data``) splitting the limit, e.g.
        per host; each key gets the full rate. ``burst``: permits that may be taken at once.
        """
        if name in self.limits or name.startswith("task:"):
            raise InvalidInput(f"limit {name!r} is declared twice or uses the reserved 'task:'")
        self.limits[name] = make_limit(name, rate, burst=burst, tasks=tasks, key=key)
        return self.limits[name]

    def limits_for(self, task: TaskDef) -> list[Limit]:
        """Every limit *task* is subject to, its own first."""
        own = [task.schedule.rate_limit] if task.schedule.rate_limit else []
        exempt = task.schedule.exempt_global
        return own + [
            lim for lim in self.limits.values() if lim.applies_to(task.name, exempt_global=exempt)
        ]

    @overload
    def task(self, fn: F, /, **options: Unpack[TaskOptions]) -> F: ...

    @overload
    def task(self, fn: None = None, /, **options: Unpack[TaskOptions]) -> Callable[[F], F]: ...

    def task(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        tags: Iterable[str] = (),
        version: str | int = "1",
        ttl: Duration | None = None,
        timeout: Duration = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: Duration = DEFAULT_BACKOFF,
        niceness: int = 0,
        revisit: Adaptive | None = None,
        rate_limit: str | float | None = None,
        exempt_global: bool = False,
        depends_on: Iterable[str] = (),
        rerun_on_change: bool = True,
        max_failures: int | None = None,
        not_found_cooldown: Duration = "31d",
        not_found_limit: int = 3,
        failed_cooldown: Duration | None = None,
        visit_weights: tuple[float, float, float] | None = None,
        actor: Actor | None = None,
        pipeline_tag: str | None = None,
        executor: str = LOCAL,
        queue: str | None = None,
    ) -> F | Callable[[F], F]:
        """Declare a task; it runs on every item carrying one of *tags*.

        ``version``: bump it when results made by older code should be redone.
        ``ttl``: how long a result stays fresh (``None``: forever). ``timeout``: the longest
        an attempt may run. ``retries``: further attempts after a failure, ``backoff`` apart
        (doubling, with jitter). ``niceness``: lower runs first.

        Scheduling (see docs/scheduling.md): ``revisit=trawl.adaptive(min=, max=)`` instead of
        a fixed TTL; ``rate_limit="20/s"``; ``exempt_global``: not subject to global limits;
        ``depends_on``: tasks whose valid results this one needs first, and with
        ``rerun_on_change`` it runs again when theirs change; ``max_failures``: pause the task
        when this many unhandled failures pile up; ``not_found_cooldown`` /
        ``not_found_limit``: how long a job whose task raised ``trawl.NotFound`` waits, and
        after how many in a row it is disabled until the item is relisted;
        ``failed_cooldown``: retry again this long after the retries ran out (default: never,
        or 14 days with ``revisit``); ``visit_weights``: (never run, largest lag, oldest due)
        shares of a batch when more is due than capacity (default 40/40/20 with ``revisit``).

        ``actor=trawl.Actor(...)``: how ``trawl run`` runs it: launch keys, how many actor
        processes, per-actor start-up and shut-down (see docs/orchestrator.md).
        ``pipeline_tag``: only remote pipelines with this tag run it (docs/pipelines.md).

        ``executor="celery"``: Celery workers run it instead of ``trawl worker`` (bind it with
        ``trawl.celery.bind`` and feed its queue with ``trawl feed celery``); ``queue``: its
        broker queue, ``trawl.<name>`` by default (see docs/executors.md).
        """

        def register(func: F) -> F:
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
                schedule=make_schedule(
                    task_name,
                    revisit=revisit,
                    rate_limit=rate_limit,
                    exempt_global=exempt_global,
                    depends_on=depends_on,
                    rerun_on_change=rerun_on_change,
                    max_failures=max_failures,
                    not_found_cooldown=not_found_cooldown,
                    not_found_limit=not_found_limit,
                    failed_cooldown=failed_cooldown,
                    visit_weights=visit_weights,
                ),
                actor=_actor(actor, task_name),
                pipeline_tag=None if pipeline_tag is None else check_tag(pipeline_tag),
                executor=_executor(executor, task_name, actor),
                queue=_queue(queue, task_name, executor),
            )
            return func

        return register(fn) if fn is not None else register

    def local(self, names: Iterable[str] | None = None) -> list[TaskDef]:
        """The tasks trawl's own workers run (all, or those *names*, refusing any that an
        external executor runs)."""
        if names is None:
            return [d for d in self.tasks.values() if d.is_local]
        chosen = self.select(names)
        for d in chosen:
            if not d.is_local:
                raise InvalidInput(
                    f"task {d.name!r} runs on {d.executor} (executor={d.executor!r}): its "
                    f"workers run it; feed them with `trawl feed {d.executor}`"
                )
        return chosen

    def external(self, executor: str) -> list[TaskDef]:
        """The tasks that *executor* runs."""
        return [d for d in self.tasks.values() if d.executor == executor]

    def declared(self) -> list[TaskDef]:
        """The tasks the user declared (every app also has the built-in ``trawl.schedule``)."""
        return [d for d in self.tasks.values() if d.name not in self.builtin]

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


def _actor(actor: Actor | None, task: str) -> Actor:
    if actor is None:
        return Actor()
    if not isinstance(actor, Actor):
        raise InvalidInput(f"task {task!r}: actor must be trawl.Actor(...), not {actor!r}")
    return actor


def _executor(executor: str, task: str, actor: Actor | None) -> str:
    if executor not in EXECUTORS:
        known = ", ".join(repr(e) for e in EXECUTORS)
        raise InvalidInput(f"task {task!r}: executor must be one of {known}, got {executor!r}")
    if executor != LOCAL and actor is not None:
        raise InvalidInput(
            f"task {task!r}: actor= says how `trawl run` runs a task; {executor} runs this one"
        )
    return executor


def _queue(queue: str | None, task: str, executor: str) -> str | None:
    if executor == LOCAL:
        if queue is not None:
            raise InvalidInput(f"task {task!r}: queue= is for tasks an external executor runs")
        return None
    if queue is None:
        return f"trawl.{task}"
    if not isinstance(queue, str) or not queue.strip() or queue != queue.strip():
        raise InvalidInput(f"task {task!r}: queue must be a non-empty name, got {queue!r}")
    return queue


def _positive(value: float, task: str, what: str) -> float:
    if value <= 0:
        raise InvalidInput(f"task {task!r}: {what} must be positive")
    return value
