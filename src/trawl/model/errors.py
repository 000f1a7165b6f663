"""The errors trawl raises, each naming what was wrong."""

from __future__ import annotations


class TrawlError(Exception):
    """Base class for every error trawl raises on purpose."""


class InvalidInput(TrawlError, ValueError):
    """Input from a user or a task was rejected before anything was written."""


class InvalidItemId(InvalidInput):
    """An item id is empty, too long or contains control characters."""


class InvalidData(InvalidInput):
    """Item data or a result is not what it must be (a JSON object, serialisable)."""


class InvalidDuration(InvalidInput):
    """A duration string such as ``7d`` could not be parsed."""


class UnknownTask(TrawlError, LookupError):
    """A task name that no registered task has."""


class ItemNotFound(TrawlError, LookupError):
    """No item (or alias) has this id."""


class ItemExists(TrawlError):
    """An item or alias with this id exists and the caller asked to fail on that."""


class AliasError(TrawlError):
    """An alias operation that would break the single-level alias rule."""


class Conflict(TrawlError):
    """The request conflicts with what is stored (a name taken, entries a journal consumer
    has not acknowledged); nothing was changed."""


class NotFound(TrawlError):
    """Raise from a task when the source says the thing is gone (HTTP 404/410, a deleted
    repository): the job waits its not-found cooldown instead of retrying soon, and after
    several in a row it is disabled until the item is listed again."""


class DatabaseUnavailable(TrawlError, ConnectionError):
    """The database cannot be reached or refused the connection."""


class TransientConflict(DatabaseUnavailable):
    """A deadlock, serialization failure or lock timeout: the transaction is worth retrying
    as it was (it is never the task's failure)."""


class DataRejected(TrawlError):
    """The database refused a value (too long, out of range, a constraint): the same
    statement will fail again, so the batch that held it is split to find it."""


class SchemaOutdated(TrawlError):
    """The database schema is older than this version of trawl expects."""


class AppLoadError(TrawlError):
    """``module:attr`` or ``path.py:attr`` did not name a trawl App."""
