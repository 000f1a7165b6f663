"""Preparing a trawl database for a benchmark: schema, the ``noop`` app's task, seeded jobs."""

from __future__ import annotations

from pathlib import Path

from trawl.runtime.app import App
from trawl.runtime.loader import load_app
from trawl.store import migrate
from trawl.store.store import Store

APPS = Path(__file__).resolve().parent.parent / "apps"
NOOP_APP = f"{APPS / 'noop.py'}:app"


def noop_app() -> App:
    return load_app(NOOP_APP)


def prepare(url: str) -> None:
    """Migrate an empty database and register the ``noop`` task, as a first worker would."""
    store = Store(url)
    try:
        migrate.upgrade(store.db)
        store.register_tasks(d.info() for d in noop_app().tasks.values())
    finally:
        store.close()
