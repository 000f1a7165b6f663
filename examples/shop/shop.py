"""The shop example: product pages are scraped for a price, their review pages for ratings.

The "site" is local fixture files (see make_fixtures.py), so the example runs without a
network; ``fetch`` stands in for an HTTP client with a little simulated latency.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from pathlib import Path
from typing import Any

import trawl

app = trawl.App()
SITE = Path(os.environ.get("SHOP_SITE", Path(__file__).parent / "site"))
BASE = "https://shop.example"


async def fetch(url: str) -> str:
    await asyncio.sleep(random.uniform(0.01, 0.05))  # pretend to be the network
    return await asyncio.to_thread((SITE / url.removeprefix(BASE + "/")).read_text)


@app.task(tags=["product"], version="1", ttl="1d", timeout="10s", retries=2, backoff="0.2s")
async def product(ctx: trawl.Context) -> dict[str, Any]:
    html = await fetch(ctx.data["url"])
    title = re.search(r'<h1 class="title">(.*?)</h1>', html)
    price = re.search(r'<p class="price">([\d.]+) (\w+)</p>', html)
    if title is None or price is None:
        raise ValueError(f"no title or price on {ctx.data['url']}")
    for href in re.findall(r'<a class="review" href="([^"]+)"', html):
        ctx.create_item(
            f"url:{BASE}{href}", tags=["review-page"], data={"url": BASE + href, "product": ctx.id}
        )
    ctx.update_data(lambda old: {**old, "title": title.group(1)})
    return {"price": float(price.group(1)), "currency": price.group(2)}


@app.task(tags=["review-page"], version="1", ttl="7d")
async def review(ctx: trawl.Context) -> dict[str, Any]:
    html = await fetch(ctx.data["url"])
    stars = re.search(r'data-stars="(\d)"', html)
    if stars is None:
        raise ValueError("review without stars")
    ctx.log("info", f"{stars.group(1)} stars for {ctx.data['product']}")
    return {"stars": int(stars.group(1))}
