"""The public API is what ``trawl`` exports; this list changes only on purpose."""

import trawl


def test_exported_members() -> None:
    exported = {name for name in dir(trawl) if not name.startswith("_")} - {
        "model",
        "runtime",
        "store",
        "engine",
        "cli",
        "crawl",  # a documented subpackage: trawl.crawl.app:app
        "demo",  # the demo site, imported by the tests that use it
        "server",  # the HTTP API, started by `trawl serve`
        "client",  # the module behind Client, AsyncClient and ApiError
        "live",  # the live layer, imported as trawl.live (docs/live.md)
        "celery",  # the Celery executor, imported as trawl.celery (docs/executors.md)
    }
    assert exported == set(trawl.__all__) - {"__version__"}
    assert set(trawl.__all__) == {
        "MAX_ID_LENGTH",
        "ApiError",
        "AsyncClient",
        "Client",
        "Actor",
        "ActorInfo",
        "ActorType",
        "QueueInfo",
        "actors_to_spawn",
        "current_actor",
        "hookimpl",
        "Adaptive",
        "NotFound",
        "adaptive",
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
        "SchemaOutdated",
        "TaskDef",
        "TrawlError",
        "UnknownTask",
        "__version__",
        # plugin-facing types: what the hooks hand a plugin
        "AttemptResult",
        "ClaimedJob",
        "FailureInfo",
        "OrchestratorView",
        "Outcome",
        "RunningActor",
        "TaskTimeout",
    }
