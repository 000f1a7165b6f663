"""The plugin manager: trawl's hookspecs, the plugins an app lists and those installed.

Plugins come from ``App(plugins=[...])`` and from the ``trawl`` entry-point group. Every
hook is a notification, so each implementation is called on its own: one that raises is
logged (naming the plugin) and the others still run; the job or actor that fired it is
never affected. Firing a hook nobody implements costs one dictionary lookup.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from typing import ParamSpec

import pluggy

from trawl.runtime import hookspecs
from trawl.runtime.app import App

log = logging.getLogger("trawl.plugins")

PROJECT = "trawl"
hookimpl = pluggy.HookimplMarker(PROJECT)
P = ParamSpec("P")


class Plugins:
    """One process's plugins, with the hooks each one implements looked up once."""

    def __init__(self, plugins: Iterable[object] = (), *, entry_points: bool = True) -> None:
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._impls: dict[str, tuple[pluggy.HookImpl, ...]] = {}
        if entry_points:
            self._load_entry_points()
        for plugin in plugins:
            self.register(plugin)

    def _load_entry_points(self) -> None:
        try:
            self.pm.load_setuptools_entrypoints(PROJECT)
        except Exception:
            log.exception("loading plugins from the %r entry-point group failed", PROJECT)
        self._refresh()

    def register(self, plugin: object, name: str | None = None) -> None:
        """Add a plugin (a module or an object with ``@trawl.hookimpl`` methods)."""
        if self.pm.is_registered(plugin):
            return
        self.pm.register(plugin, name)
        self.pm.check_pending()  # a misspelt hook name fails here, not silently
        for caller in self.pm.get_hookcallers(plugin) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin and _wrapper(impl):
                    log.warning(
                        "plugin %s: %s is a wrapper; trawl hooks are notifications, so it is "
                        "ignored",
                        impl.plugin_name,
                        caller.name,
                    )
        self._refresh()

    def _refresh(self) -> None:
        self._impls = {}
        for name in self.names():
            caller = getattr(self.pm.hook, name)
            # pluggy calls the last registered first; so do we.
            impls = tuple(reversed([i for i in caller.get_hookimpls() if not _wrapper(i)]))
            if impls:
                self._impls[name] = impls

    @staticmethod
    def names() -> list[str]:
        """Every hook name, in the order hookspecs.py declares them."""
        return [n for n in vars(hookspecs) if n.startswith("trawl_")]

    @staticmethod
    def hooks() -> list[Callable[..., None]]:
        """Every hookspec function, in the order hookspecs.py declares them."""
        return [getattr(hookspecs, name) for name in Plugins.names()]

    def implemented(self, *hooks: Callable[..., None]) -> bool:
        """Whether any plugin implements one of *hooks* (functions of hookspecs.py)."""
        return any(_name(hook) in self._impls for hook in hooks)

    def fire(self, hook: Callable[P, None], /, *args: P.args, **kwargs: P.kwargs) -> None:
        """Fire *hook*, named by its hookspec function so that a misspelt hook or a wrong
        argument is a type error; each implementation gets the arguments it asks for."""
        name = _name(hook)
        impls = self._impls.get(name)
        if impls is None:
            return
        values = _signature(hook).bind(*args, **kwargs).arguments
        for impl in impls:
            try:
                impl.function(*[values[arg] for arg in impl.argnames])
            except Exception:
                log.exception("plugin %s failed in %s; carrying on", impl.plugin_name, name)


_SIGNATURES: dict[str, inspect.Signature] = {}


def _name(hook: Callable[..., None]) -> str:
    name = hook.__name__
    if getattr(hookspecs, name, None) is not hook:
        raise TypeError(f"{name!r} is not a hookspec of trawl.runtime.hookspecs")
    return name


def _signature(hook: Callable[..., None]) -> inspect.Signature:
    found = _SIGNATURES.get(hook.__name__)
    if found is None:
        found = _SIGNATURES[hook.__name__] = inspect.signature(hook)
    return found


def _wrapper(impl: pluggy.HookImpl) -> bool:
    return bool(impl.hookwrapper or impl.wrapper)


def for_app(app: App, *extra: object) -> Plugins:
    """The plugins of *app* (its ``plugins`` list), the installed ones, and *extra*."""
    return Plugins([*app.plugins, *extra])
