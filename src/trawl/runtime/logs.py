"""Logging for every trawl process: the one setup of the root logger, logs as JSON lines
(``trawl run --log-json`` for services), and how actors report to the orchestrator (which
relays their records through its own handlers)."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

PROGRESS = "trawl.progress"  # progress lines, shown whenever a --progress reporter exists


def setup(level: str, *, handler: logging.Handler | None = None, as_json: bool = False) -> None:
    """Send every record at *level* and above to *handler* (default: stderr, as JSON lines
    with *as_json*, else plain timestamped lines). Progress lines are kept at any level:
    they are only made when progress was asked for. Alembic's chatter is kept quiet."""
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            JsonFormatter()
            if as_json
            else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger(PROGRESS).setLevel(logging.INFO)
    logging.getLogger("alembic").setLevel(logging.WARNING)


# LogRecord attributes that are not "extra" fields a caller passed.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, traceback, and any extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        return json.dumps(out, ensure_ascii=False, default=str, separators=(",", ":"))


def relay(line: str, **extra: Any) -> logging.LogRecord:
    """Turn a line an actor wrote on stderr back into a record (plain text is kept as is)."""
    try:
        fields = json.loads(line)
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or "message" not in fields:
        fields = {"level": "info", "logger": "trawl.actor", "message": line}
    level = logging.getLevelName(str(fields.get("level", "info")).upper())
    message = str(fields["message"])
    if fields.get("traceback"):
        message += "\n" + str(fields["traceback"])
    record = logging.LogRecord(
        str(fields.get("logger", "trawl.actor")),
        level if isinstance(level, int) else logging.INFO,
        "",
        0,
        message,
        None,
        None,
    )
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d}Z"
