"""Finding the user's app from ``module:attr`` or ``path/to/file.py:attr``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from trawl.model.errors import AppLoadError
from trawl.runtime.app import App


def load_app(spec: str) -> App:
    """Import the App that *spec* names."""
    target, _, attr = spec.rpartition(":")
    if not target:
        target, attr = spec, "app"
    module = _load_file(target) if target.endswith(".py") else _import(target)
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        found = "nothing" if app is None else type(app).__name__
        raise AppLoadError(f"{spec!r}: {attr!r} in {target} is {found}, not a trawl.App")
    return app


def _load_file(path: str) -> object:
    file = Path(path)
    if not file.is_file():
        raise AppLoadError(f"app file {path!r} does not exist")
    name = f"trawl_app_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise AppLoadError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise AppLoadError(f"importing {path!r} failed: {type(error).__name__}: {error}") from error
    return module


def _import(name: str) -> object:
    """Import the app's module, looking in the current directory for this import only: a
    file there must not shadow modules imported later (rule hooks, plugins, the stdlib)."""
    added = "" not in sys.path
    if added:
        sys.path.insert(0, "")
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise AppLoadError(f"cannot import module {name!r}: {error}") from error
    finally:
        if added:
            sys.path.remove("")
