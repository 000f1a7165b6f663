"""Templates: one Jinja environment for pages and the fragments the live feed pushes, with
the filters that make numbers, times and sizes readable."""

from __future__ import annotations

import json
import time
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from litestar import Response

from trawl.server.dashboard import charts

HTML = "text/html; charset=utf-8"
NONE = "\u2013"  # an en dash: no value
# Pages are never cached: they show live state, and a shared cache must not keep a
# signed-in page. Frames are refused: no other site may put actions under a user's click.
# (nosniff is on every response of the server: trawl.server.headers.)
HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline';"
        " frame-ancestors 'none'; form-action 'self'"
    ),
    "Referrer-Policy": "same-origin",
}


def number(value: int | float | None) -> str:
    if value is None:
        return NONE
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def size(value: int | None) -> str:
    if value is None:
        return NONE
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:,.0f} {unit}" if unit == "B" else f"{amount:,.1f} {unit}"
        amount /= 1024
    return f"{amount:,.1f} TiB"


def span(seconds: float | None) -> str:
    """A duration as a person says it: 4 s, 3 min, 2 h 5 min, 6 d."""
    if seconds is None:
        return NONE
    s = abs(seconds)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 90:
        return f"{s:.0f} s"
    if s < 90 * 60:
        return f"{s / 60:.0f} min"
    if s < 36 * 3600:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{s / 86400:.0f} d"


def ago(at: float | None, now: float | None = None) -> str:
    """'5 min ago' or 'in 5 min', relative to *now*."""
    if at is None:
        return NONE
    delta = (now if now is not None else time.time()) - at
    return f"{span(delta)} ago" if delta >= 0 else f"in {span(delta)}"


def stamp(at: float | None) -> str:
    if at is None:
        return NONE
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("trawl.server.dashboard", "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,  # a misspelt name fails the test that renders it
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(number=number, size=size, span=span, ago=ago, stamp=stamp, pretty=pretty)
    env.globals.update(sparkline=charts.sparkline, histogram=charts.histogram)
    return env


ENV = _environment()


def fragment(name: str, **context: Any) -> str:
    """A template rendered to text (a page or a piece of one)."""
    return ENV.get_template(name).render(**context)


def page(name: str, status: int = 200, **context: Any) -> Response[str]:
    """A whole page as an HTML response."""
    context.setdefault("now", time.time())
    return Response(fragment(name, **context), status_code=status, media_type=HTML, headers=HEADERS)
