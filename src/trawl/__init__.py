"""trawl: a durable orchestrator for crawl, scrape and archive work.

The public API is what this module exports; everything else is private.
"""

from trawl.engine.revisit import Adaptive, adaptive
from trawl.model.durations import Duration
from trawl.model.errors import (
    AliasError,
    AppLoadError,
    DatabaseUnavailable,
    InvalidData,
    InvalidDuration,
    InvalidInput,
    InvalidItemId,
    ItemExists,
    ItemNotFound,
    NotFound,
    SchemaOutdated,
    TrawlError,
    UnknownTask,
)
from trawl.model.ids import MAX_ID_LENGTH
from trawl.model.records import AttemptResult, ClaimedJob, FailureInfo, ItemView, JobView
from trawl.model.states import JobStatus, Outcome
from trawl.runtime.actor.spec import (
    Actor,
    ActorInfo,
    ActorType,
    QueueInfo,
    actors_to_spawn,
    current_actor,
)
from trawl.runtime.app import App, TaskDef
from trawl.runtime.attempt import TaskTimeout
from trawl.runtime.context import Context
from trawl.runtime.hookspecs import OrchestratorView, RunningActor
from trawl.runtime.plugins import hookimpl

__version__ = "0.1.0.dev0"

_LAZY = {"Client", "AsyncClient", "ApiError"}  # the HTTP client: httpx only when used


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from trawl import client

        return getattr(client, name)
    raise AttributeError(f"module 'trawl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)


__all__ = [  # noqa: RUF022 - the lazy names are listed with the rest
    "MAX_ID_LENGTH",
    "ApiError",
    "AsyncClient",
    "Client",
    "Actor",
    "ActorInfo",
    "ActorType",
    "Adaptive",
    "AliasError",
    "App",
    "AppLoadError",
    "AttemptResult",
    "ClaimedJob",
    "Context",
    "DatabaseUnavailable",
    "Duration",
    "FailureInfo",
    "InvalidData",
    "InvalidDuration",
    "InvalidInput",
    "InvalidItemId",
    "ItemExists",
    "ItemNotFound",
    "ItemView",
    "JobStatus",
    "JobView",
    "NotFound",
    "OrchestratorView",
    "Outcome",
    "QueueInfo",
    "RunningActor",
    "SchemaOutdated",
    "TaskDef",
    "TaskTimeout",
    "TrawlError",
    "UnknownTask",
    "__version__",
    "actors_to_spawn",
    "adaptive",
    "current_actor",
    "hookimpl",
]
