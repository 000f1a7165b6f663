"""Small charts drawn as inline SVG on the server: a sparkline of a rate and a histogram.

Drawn here rather than by a JavaScript chart library: the live feed swaps them in like any
other fragment, they need no script to appear, and each carries a text equivalent for
screen readers (``role="img"`` with an ``aria-label``)."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape


def sparkline(values: Sequence[float], label: str, width: int = 160, height: int = 28) -> Markup:
    """A line over *values* (oldest first), scaled to its own maximum."""
    if not values:
        return Markup('<span class="muted">no data yet</span>')
    top = max(values) or 1.0
    step = width / max(len(values) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}" for i, v in enumerate(values)
    )
    area = f"0,{height} {points} {width},{height}"
    return Markup(
        f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        f' role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f'<polygon points="{area}" class="spark-area"/>'
        f'<polyline points="{points}" class="spark-line"/></svg>'
    )


def histogram(
    bars: Sequence[tuple[int, int]], label: str, width: int = 420, height: int = 120
) -> Markup:
    """Vertical bars, one per (x, count), with the x labels under them."""
    if not bars:
        return Markup('<span class="muted">no pages yet</span>')
    top = max(n for _, n in bars) or 1
    slot = width / len(bars)
    bar = max(slot - 4, 1)
    parts = []
    for i, (x, n) in enumerate(bars):
        h = (n / top) * (height - 30)
        left = i * slot + 2
        parts.append(
            f'<rect x="{left:.1f}" y="{height - 18 - h:.1f}" width="{bar:.1f}" height="{h:.1f}"'
            f' class="bar"><title>depth {x}: {n:,} pages</title></rect>'
            f'<text x="{left + bar / 2:.1f}" y="{height - 4}" class="axis">{x}</text>'
        )
        if n:
            parts.append(
                f'<text x="{left + bar / 2:.1f}" y="{height - 22 - h:.1f}"'
                f' class="count">{n:,}</text>'
            )
    text = ", ".join(f"depth {x}: {n}" for x, n in bars)
    return Markup(
        f'<svg class="histogram" viewBox="0 0 {width} {height}" width="100%"'
        f' role="img" aria-label="{escape(label)}: {escape(text)}">'
        f"<title>{escape(label)}</title>{''.join(parts)}</svg>"
    )
