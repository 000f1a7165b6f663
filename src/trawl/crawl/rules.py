"""Crawl rules: ordered (kind, regex, value) entries; the last matching rule wins per setting.

Kinds: ``accept`` (whether a discovered URL is added), ``skip`` (``--reject``: the page is
marked skipped instead of fetched), ``user_agent``, ``header`` (``Name: value``, per name),
``cookie`` (``name=value``, per name), ``preset`` (a persona: user agent and viewport),
``render`` (``browser`` or ``plain``), ``custom_js`` (a script run in the page after it
loads, stored as its text so every worker runs the same one) and ``hook``
(``module:function`` called as ``fn(url, settings)``, returning new settings or ``None``).
Rulesets are versioned: every edit stores a new version, and each fetch attempt
records the version it ran under.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from trawl.crawl import personas
from trawl.engine.usercode import bounded
from trawl.model.errors import InvalidInput

KINDS = (
    "accept",
    "skip",
    "user_agent",
    "header",
    "cookie",
    "preset",
    "render",
    "custom_js",
    "hook",
)
RENDERS = ("browser", "plain")
MAX_SCRIPT = 100_000  # characters of a custom script (it is stored with every ruleset)
DEFAULT_USER_AGENT = "trawl/0.1 (+https://github.com/trawl; archiving crawler)"


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    kind: str
    match: str  # a regular expression, searched in the canonical URL
    value: Any = True

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "match": self.match, "value": self.value}


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """What the rules say about one URL."""

    accept: bool = False
    skip: bool = False
    user_agent: str = DEFAULT_USER_AGENT
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    preset: str | None = None  # a persona's name (crawl/personas.py)
    render: str | None = None  # "browser" or "plain"; None: the crawl's --browser says
    custom_js: str | None = None  # run in the page after it loads (browser pages only)


def make_rule(kind: str, match: str, value: Any = True) -> Rule:
    """A checked rule."""
    if kind not in KINDS:
        raise InvalidInput(f"unknown rule kind {kind!r}; use one of {', '.join(KINDS)}")
    try:
        re.compile(match)
    except re.error as error:
        raise InvalidInput(f"rule pattern {match!r} is not a regular expression: {error}") from None
    if kind == "header" and (not isinstance(value, str) or ":" not in value):
        raise InvalidInput(f"a header rule's value is 'Name: value', not {value!r}")
    if kind == "hook" and (not isinstance(value, str) or ":" not in value):
        raise InvalidInput(f"a hook rule's value is 'module:function', not {value!r}")
    if kind in ("accept", "skip") and not isinstance(value, bool):
        raise InvalidInput(f"an {kind} rule's value is true or false, not {value!r}")
    _check_browser_rule(kind, value)
    return Rule(kind=kind, match=match, value=value)


def _check_browser_rule(kind: str, value: Any) -> None:
    if kind == "cookie" and (not isinstance(value, str) or "=" not in value.strip("= ")):
        raise InvalidInput(f"a cookie rule's value is 'name=value', not {value!r}")
    if kind == "preset":
        personas.preset(str(value))  # names the presets there are when it is unknown
    if kind == "render" and value not in RENDERS:
        raise InvalidInput(f"a render rule's value is one of {', '.join(RENDERS)}, not {value!r}")
    if kind == "custom_js":
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput("a custom_js rule's value is a script's text, and it is empty")
        if len(value) > MAX_SCRIPT:
            raise InvalidInput(
                f"a custom script of {len(value)} characters is longer than {MAX_SCRIPT}"
            )


def from_json(rules: Sequence[dict[str, Any]]) -> tuple[Rule, ...]:
    return tuple(Rule(kind=r["kind"], match=r["match"], value=r.get("value", True)) for r in rules)


class Ruleset:
    """One version of a crawl's rules, compiled."""

    def __init__(self, version: int, rules: Sequence[Rule]) -> None:
        self.version = version
        self.rules = tuple(rules)
        self._compiled = [(re.compile(r.match), r) for r in self.rules]

    def settings(self, url: str) -> Settings:
        """Apply every matching rule in order; the last one wins per setting."""
        found: dict[str, Any] = {"headers": {}, "cookies": {}}
        hooks: list[str] = []
        for pattern, rule in self._compiled:
            if not pattern.search(url):
                continue
            if rule.kind == "hook":
                hooks.append(str(rule.value))
            else:
                _apply(found, rule)
        settings = Settings(**found)
        for hook in hooks:
            settings = _run_hook(hook, url, settings)
        return settings

    def accepts(self, url: str) -> bool:
        """Whether a discovered *url* is added to the crawl at all."""
        return self._last("accept", url)

    def skips(self, url: str) -> bool:
        """Whether *url* is skipped instead of fetched (hooks aside: they run at fetch)."""
        return self._last("skip", url)

    def _last(self, kind: str, url: str) -> bool:
        value = False
        for pattern, rule in self._compiled:
            if rule.kind == kind and pattern.search(url):
                value = bool(rule.value)
        return value


def _apply(found: dict[str, Any], rule: Rule) -> None:
    """One matching rule's say, over what earlier rules said."""
    if rule.kind in ("accept", "skip"):
        found[rule.kind] = bool(rule.value)
    elif rule.kind == "header":
        name, _, value = str(rule.value).partition(":")
        found["headers"][name.strip()] = value.strip()
    elif rule.kind == "cookie":
        name, _, value = str(rule.value).partition("=")
        found["cookies"][name.strip()] = value.strip()
    elif rule.kind == "preset":
        # A preset is a user agent too: the later of a preset and a user_agent rule wins.
        found["preset"], found["user_agent"] = rule.value, personas.preset(rule.value).user_agent
    else:  # user_agent, render, custom_js
        found[rule.kind] = str(rule.value)


def _run_hook(spec: str, url: str, settings: Settings) -> Settings:
    # The politeness gate holds the database while rules apply: the hook gets a time limit.
    changed = bounded(f"rule hook {spec}", load_hook(spec), url, settings)
    if changed is None:
        return settings
    if isinstance(changed, Settings):
        return changed
    if isinstance(changed, dict):
        return replace(settings, **changed)
    raise InvalidInput(f"hook {spec} returned {type(changed).__name__}, not Settings or a dict")


HOOK_MODULES_ENV = "TRAWL_HOOK_MODULES"  # comma-separated, for child processes


def allow_hook_modules(names: Sequence[str]) -> None:
    """Let rule hooks import these modules in this process (and processes it starts)."""
    allowed = allowed_hook_modules() | {n.strip() for n in names if n.strip()}
    os.environ[HOOK_MODULES_ENV] = ",".join(sorted(allowed))


def allowed_hook_modules() -> set[str]:
    return {n for n in os.environ.get(HOOK_MODULES_ENV, "").split(",") if n}


def load_hook(spec: str) -> Callable[[str, Settings], Any]:
    """The function a hook rule names, if an operator allowed its module: a rule is a row
    anyone with write access to the database can add, and importing runs code."""
    module = spec.partition(":")[0]
    if module not in allowed_hook_modules():
        raise InvalidInput(
            f"rule hook {spec!r}: module {module!r} is not allowed here; start the crawl or "
            f"worker with --allow-hook-module {module}"
        )
    return _import_hook(spec)


@lru_cache(maxsize=64)
def _import_hook(spec: str) -> Callable[[str, Settings], Any]:
    module, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise InvalidInput(f"cannot load rule hook {spec!r}: {error}") from None
    if not callable(fn):
        raise InvalidInput(f"rule hook {spec!r} is not a function")
    return fn  # type: ignore[no-any-return]


def host_rule(url_host: str) -> Rule:
    """The default accept rule for a seed's host: any port, any path."""
    return Rule(kind="accept", match=rf"^https?://{re.escape(url_host)}(:\d+)?/")
