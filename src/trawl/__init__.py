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
from trawl.model.records import ItemView, JobView
from trawl.model.states import JobStatus
from trawl.runtime.actor.spec import (
    Actor,
    ActorInfo,
    ActorType,
    QueueInfo,
    actors_to_spawn,
    current_actor,
)
from trawl.runtime.app import App, TaskDef
from trawl.runtime.context import Context
from trawl.runtime.plugins import hookimpl

__version__ = "0.1.0.dev0"

__all__ = [
    "MAX_ID_LENGTH",
    "Actor",
    "ActorInfo",
    "ActorType",
    "Adaptive",
    "AliasError",
    "App",
    "AppLoadError",
    "Context",
    "DatabaseUnavailable",
    "Duration",
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
    "QueueInfo",
    "SchemaOutdated",
    "TaskDef",
    "TrawlError",
    "UnknownTask",
    "__version__",
    "actors_to_spawn",
    "adaptive",
    "current_actor",
    "hookimpl",
]
